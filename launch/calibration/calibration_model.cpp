// The model plan's calibrations time (see calibration_model.h).
#include "launch/calibration/calibration_model.h"

#include <algorithm>
#include <random>

#include "framework/cpu/cpu_backend.h"
#include "framework/timer.h"

namespace gpt {

double median_of(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

CalibrationModel::CalibrationModel(const ModelConfig& cfg, int64_t mb, MPI_Comm tp_group)
    : backend_(make_cpu_backend(1)),
      group_(make_mpi_communicator(tp_group, "tp")),
      tp_(*group_, *backend_),
      store_(*backend_),
      // A split backward, so that the input and weight halves are timed apart.
      stage_(store_, tp_, cfg, StageSpec{0, cfg.n_layer, true, true, false}, mb, 1, 1,
             ChunkRecompute{.mode = Recompute::kNone, .full_blocks = 0, .split_backward = true}),
      tokens_(static_cast<size_t>(mb * cfg.seq_len)),
      targets_(tokens_.size()) {
  store_.allocate();
  store_.initialize(1);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size - 1));
  for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] = token(rng), targets_[i] = token(rng);
}

std::array<double, 3> CalibrationModel::passes() {
  const double t0 = now_seconds();
  stage_.forward(0, tokens_.data(), targets_.data());
  const double t1 = now_seconds();
  stage_.backward_input(0, 0, 1.0f / static_cast<float>(tokens_.size()));
  const double t2 = now_seconds();
  stage_.backward_weight(0, 0);
  return {t1 - t0, t2 - t1, now_seconds() - t2};
}

int64_t CalibrationModel::peak_bytes() const {
  return backend_->memory().peak_total();
}

}  // namespace gpt
