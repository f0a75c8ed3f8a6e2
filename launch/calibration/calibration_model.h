// The model `plan --calibrate` and `plan --calibrate-turns` time: the whole model (every layer,
// embedding and head) at one micro-batch size on a CPU backend of its own, with random tokens,
// over a tp group (one rank: tp 1, no MPI call while it runs, so any thread may run it); and
// the median their figures take.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "framework/backend.h"
#include "framework/config.h"
#include "framework/parameter.h"
#include "layers/model_stage.h"
#include "parallel/communicator.h"
#include "parallel/tensor_parallel.h"

namespace gpt {

// The median of `times`: every calibration figure is one (train's step times are medians too).
double median_of(std::vector<double> times);

class CalibrationModel {
 public:
  // Built where MPI may be called: its tp group duplicates `tp_group` (collective over it).
  CalibrationModel(const ModelConfig& cfg, int64_t mb, MPI_Comm tp_group = MPI_COMM_SELF);

  // Seconds of one forward, input-gradient and weight-gradient pass.
  std::array<double, 3> passes();
  int64_t peak_bytes() const;

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> group_;
  TensorParallel tp_;
  ParameterStore store_;
  ModelStage stage_;
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace gpt
