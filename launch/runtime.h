// Everything a program needs to run the model on this rank: the backend, the process grid, the
// tp operators, the parameter store and this rank's pipeline stage, built in that order from the
// model shape and the layout. Shared by train, eval and generate.
#pragma once

#include <memory>
#include <string>

#include "framework/backend.h"
#include "framework/config.h"
#include "framework/parameter.h"
#include "layers/gpt_stage.h"
#include "parallel/process_grid.h"
#include "parallel/tensor_parallel.h"

namespace gpt {

struct RuntimeOptions {
  GridOptions grid;
  std::string device = "auto";  // auto | cpu | cuda
  int threads = 0;              // CPU threads per rank; 0 = node cores / ranks on the node
  int64_t micro_batch = 1;
  bool sequence_parallel = false;
  int num_caches = 1;
  int num_grad_sets = 1;
};

// Balanced split of the layers: stage s of pp holds layers [s*L/pp, (s+1)*L/pp).
StageSpec balanced_stage(const ModelConfig& cfg, int pp, int stage);

class Runtime {
 public:
  Runtime(MPI_Comm world, const ModelConfig& cfg, const RuntimeOptions& options);
  Backend& backend() { return *backend_; }
  ProcessGrid& grid() { return *grid_; }
  TensorParallel& tp() { return *tp_; }
  ParameterStore& store() { return *store_; }
  GptStage& stage() { return *stage_; }
  const ModelConfig& model() const { return cfg_; }
  int threads() const { return threads_; }
  std::string layout() const;  // "tp=2 dp=1 pp=1"

 private:
  ModelConfig cfg_;
  int threads_ = 1;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<ParameterStore> store_;
  std::unique_ptr<GptStage> stage_;
};

}  // namespace gpt
