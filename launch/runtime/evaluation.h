// Mean validation loss over the first K sequential windows of a data set (docs/DESIGN.md "Data"):
// the windows are dealt round-robin to the dp ranks and run in microbatches of the stage's size;
// a last, partial microbatch is padded and its padding rows are left out of the sum.
#pragma once

#include <cstdint>

#include "framework/io/dataset.h"
#include "launch/runtime/runtime.h"

namespace gpt {

struct EvalResult {
  double loss = 0.0;    // mean token cross-entropy
  int64_t windows = 0;  // windows evaluated (K clamped to the file's)
  int64_t tokens = 0;   // targets counted
};

// Whether this rank reads windows from the data set: only ranks holding the embedding (tokens)
// or the head (targets); a middle pipeline stage's batch is never read (its values are unused).
bool rank_reads_data(Runtime& rt);

// Collective over the grid. Same value on every rank.
EvalResult evaluate(Runtime& rt, const TokenDataset& data, int64_t max_windows);

}  // namespace gpt
