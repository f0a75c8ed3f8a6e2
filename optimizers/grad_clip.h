// Gradient clipping as torch.nn.utils.clip_grad_norm_ over the whole model across the grid
// (docs/DESIGN.md "Optimizer semantics"): the global L2 norm counts every tp-replicated parameter
// once (tp rank 0's copy) and the tied wte once (the first stage's), summed over the tp and pp
// groups. dp is left out: after the dp reduction every replica holds the same gradients; under the
// distributed optimizer each dp rank holds its shard of them (update_grads), and the shards'
// squares are summed over dp as well, each element counted once. The caller logs
// the norm before clipping and skips the update on a non-finite norm (std::isfinite).
#pragma once

#include "framework/parameter.h"
#include "parallel/communicator.h"
#include "parallel/process_grid.h"

namespace gpt {

// Sum of squares (in double) of the gradients this rank counts once over tp and pp (of its
// state pieces: all of them unless sharded).
double local_grad_sum_squares(ParameterStore& store, int tp_rank);

// The global gradient norm, identical on every rank of the grid (collective over tp and pp, and
// dp when the store's optimizer state is sharded).
double global_grad_norm(ParameterStore& store, ProcessGrid& grid);
// The same over explicit groups: `tp` and `pp` are this rank's tp and pp communicators, `dp` its
// dp communicator when the shards must be summed (null otherwise).
double global_grad_norm(ParameterStore& store, int tp_rank, Communicator& tp, Communicator& pp,
                        Communicator* dp = nullptr);

// min(1, max_norm / (norm + 1e-6)); 1 when clipping is off (max_norm 0). The norm must be finite.
double clip_coefficient(double norm, double max_norm);

// Every gradient the optimizer reads (update_grads) *= coef (as float), tied copies included so
// that they stay identical. coef 1 leaves the gradients untouched.
void scale_grads(ParameterStore& store, double coef);

}  // namespace gpt
