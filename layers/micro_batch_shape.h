// The microbatch every layer of a stage is built for (llm.c's sizes): B sequences of T tokens,
// N = B*T rows. Layers take it at construction, so forward and backward take no sizes. The
// tensor-parallel regions (linears, attention, the head's logits) see all N rows; the LayerNorm
// and residual regions see Nl: N, or this rank's N/tp with sequence parallelism.
#pragma once

#include <cstdint>

#include "parallel/tensor_parallel.h"

namespace gpt {

struct MicroBatchShape {
  int64_t B;   // sequences
  int64_t T;   // tokens per sequence
  int64_t N;   // B*T rows
  int64_t Nl;  // rows of the LayerNorm and residual regions on this rank
};

inline MicroBatchShape micro_batch_shape(const TensorParallel& tp, int64_t B, int64_t T) {
  return {.B = B, .T = T, .N = B * T, .Nl = tp.local_rows(B * T)};
}

}  // namespace gpt
