// Everything a program needs to run the model on this rank: the process grid, the backend (on
// CUDA: this rank's GPU, and the grid's groups moved to NCCL or host-staged MPI), the tp
// operators, the parameter store and this rank's pipeline stage, built in that order from the
// model shape and the layout; then the store's flat buffers, laid out by the dp bucket plan
// (padded, and the optimizer state sharded, under the distributed optimizer). Shared by train,
// eval and generate.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/backend.h"
#include "framework/config.h"
#include "framework/parameter.h"
#include "launch/runtime/device_setup.h"
#include "layers/model_chunk.h"
#include "layers/model_stage.h"
#include "parallel/bucket_plan.h"
#include "parallel/layout.h"
#include "parallel/memory_model.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_grid.h"
#include "parallel/tensor_parallel.h"

namespace gpt {

struct RuntimeOptions {
  Layout layout;  // its dp may be 0: derived from the world's size
  // Simulated node size for the "tp must not span nodes" rule; 0 = detect (process_grid.h).
  int ranks_per_node = 0;
  bool allow_tp_across_nodes = false;
  ExecutionOptions execution;
  int64_t dp_bucket_elements = kDefaultBucketElements;  // gradient elements per dp bucket
  // The step's schedule: each chunk gets the caches and gradient sets it states for that chunk
  // of this rank's stage. None: one of each, what the forward-only runs of eval and generate use.
  std::optional<Schedule> schedule;
  // False: the parameters are registered (names, shapes, slabs) but their buffers never
  // allocated, and nothing may run: convert, which writes weights from elsewhere tensor by
  // tensor (checkpoint_writer.h, ValueSource).
  bool allocate_parameters = true;
};

class Runtime {
 public:
  Runtime(MPI_Comm world, const ModelConfig& cfg, const RuntimeOptions& options);
  Backend& backend() { return *backend_; }
  ProcessGrid& grid() { return *grid_; }
  TensorParallel& tp() { return *tp_; }
  ParameterStore& store() { return *store_; }
  // The dp buckets the store was allocated with (its padding; sharded under ZeRO-1 at dp > 1).
  const BucketPlan& bucket_plan() const { return bucket_plan_; }
  ModelStage& stage() { return *chunks_.front(); }  // chunk 0: the stage itself when v = 1
  std::vector<std::unique_ptr<ModelStage>>& chunks() { return chunks_; }
  // The chunks as the pipeline executor drives them (each reports the buffers its stage holds).
  std::deque<ModelChunk> pipeline_chunks();
  const ModelConfig& model() const { return cfg_; }
  const RuntimeOptions& options() const { return options_; }
  // The training step's schedule (RuntimeOptions::schedule; a runtime built without one has none).
  const Schedule& schedule() const;
  int threads() const { return threads_; }
  // How device buffers move between ranks on CUDA; none on the CPU.
  std::optional<DeviceTransport> transport() const { return transport_; }
  std::string layout() const;  // "tp=2 dp=1 pp=1"

 private:
  ModelConfig cfg_;
  RuntimeOptions options_;
  int threads_ = 1;
  std::optional<DeviceTransport> transport_;
  // The grid is declared after the backend so it is destroyed first: its NCCL communicators
  // use the backend's stream.
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<ParameterStore> store_;
  BucketPlan bucket_plan_;
  std::vector<std::unique_ptr<ModelStage>> chunks_;
};

}  // namespace gpt
