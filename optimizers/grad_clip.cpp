// The global gradient norm and clipping; see grad_clip.h for what counts once.
#include "optimizers/grad_clip.h"

#include <algorithm>
#include <cmath>

#include "framework/check.h"

namespace gpt {

double local_grad_sum_squares(ParameterStore& store, int tp_rank) {
  Backend& backend = store.backend();
  const float* grads = store.update_grads();
  double sum = 0.0;
  // One reduction per run of consecutive counted pieces rather than one per tensor.
  int64_t run_offset = 0, run_numel = 0;
  auto flush = [&] {
    if (run_numel > 0) sum += backend.sum_squares(grads + run_offset, run_numel);
    run_numel = 0;
  };
  for (const Parameter& p : store.params()) {
    if (p.numel() == 0) continue;
    if (!p.counts_once_over_tp_pp(tp_rank)) {
      flush();
      continue;
    }
    for (const StatePiece& piece : store.state_pieces(p)) {
      if (run_numel == 0 || run_offset + run_numel != piece.state_offset) {
        flush();
        run_offset = piece.state_offset;
      }
      run_numel += piece.numel;
    }
  }
  flush();
  return sum;
}

double global_grad_norm(ParameterStore& store, int tp_rank, Communicator& tp, Communicator& pp,
                        Communicator* dp) {
  double sum = local_grad_sum_squares(store, tp_rank);
  // Over tp, then over pp: together the whole tp x pp model of this dp replica. Every dp replica
  // reduces the same values over groups of the same shape, so all ranks agree on the result
  // (and hence on skipping a non-finite step). With sharded optimizer state each dp rank holds
  // its shard of the reduced gradient, so the shards are summed over dp too.
  tp.all_reduce(&sum, 1, ReduceOp::kSum);
  pp.all_reduce(&sum, 1, ReduceOp::kSum);
  if (dp != nullptr) dp->all_reduce(&sum, 1, ReduceOp::kSum);
  return std::sqrt(sum);
}

double global_grad_norm(ParameterStore& store, ProcessGrid& grid) {
  return global_grad_norm(store, grid.tp_rank(), grid.tp(), grid.pp(),
                          store.optimizer_state_sharded() ? &grid.dp() : nullptr);
}

double clip_coefficient(double norm, double max_norm) {
  GPT_CHECK(max_norm >= 0.0, "gradient clipping threshold must be >= 0, got " << max_norm);
  if (max_norm == 0.0) return 1.0;
  GPT_CHECK(std::isfinite(norm), "clip coefficient of a non-finite gradient norm " << norm);
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void scale_grads(ParameterStore& store, double coef) {
  if (coef == 1.0) return;  // x * 1.0f == x: skip the pass
  store.backend().scale(store.update_grads(), static_cast<float>(coef), store.state_numel());
}

}  // namespace gpt
