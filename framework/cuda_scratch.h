// The CUDA backend's per-call device scratch as host formulas, free of CUDA so that the memory
// model and the planner compute it on any machine: the kernels (framework/cuda/) size their
// scratch with these functions, the memory model (parallel/memory_model.cpp) predicts their
// largest request, and the trainer reserves that before the first step (Backend::reserve_scratch),
// so the buffers never grow mid-run and the measured workspace equals the prediction.
#pragma once

#include <cstdint>

namespace gpt {

// Column sums (bias, LayerNorm and RMSNorm weight gradients) reduce a fixed number of row chunks,
// in double, then the chunks in order: deterministic whatever the row count.
inline constexpr int64_t kCudaColumnChunks = 128;
// Whole-buffer sums (the loss, the gradient norm) always run this grid of double partials.
inline constexpr int64_t kCudaSumBlocks = 512;
// The optimizers' table: parameter runs cut into blocks of at most this many elements.
inline constexpr int64_t kCudaUpdateBlockElements = 8192;
inline constexpr int64_t kCudaUpdateBlockBytes = 16;  // offset (8), numel (4), decay flag (4)

inline int64_t cuda_column_sum_scratch_bytes(int64_t C) {
  return 8 * kCudaColumnChunks * C;
}
// The weight's and the bias's partials.
inline int64_t cuda_layernorm_weight_scratch_bytes(int64_t C) {
  return 2 * cuda_column_sum_scratch_bytes(C);
}
// The weight's partials (RMSNorm has no bias).
inline int64_t cuda_rmsnorm_weight_scratch_bytes(int64_t C) {
  return cuda_column_sum_scratch_bytes(C);
}
inline int64_t cuda_full_sum_scratch_bytes() {
  return 8 * kCudaSumBlocks;
}

// The embedding backward sorts the N tokens' (row, position) pairs: four arrays of N 32-bit
// values, each 256-byte aligned, then CUB's radix-sort storage. CUB sizes that storage from its
// tuning of the device, which a host cannot ask, so the backend reserves this bound and checks
// CUB's request against it: CUB's onesweep sort keeps alternate key and value arrays (8 bytes a
// pair), per-pass digit counters and one look-back state per tile and digit (at most 4 passes of
// 256 8-byte counters per tile of >= 1024 pairs: 8 bytes a pair), and aligns each piece.
inline int64_t cuda_sort_array_bytes(int64_t N) {
  return (4 * N + 255) / 256 * 256;
}
inline int64_t cuda_radix_sort_bound_bytes(int64_t N) {
  return 16 * N + (int64_t{64} << 10);
}
inline int64_t cuda_embedding_backward_scratch_bytes(int64_t N) {
  return N == 0 ? 0 : 4 * cuda_sort_array_bytes(N) + cuda_radix_sort_bound_bytes(N);
}

inline int64_t cuda_update_table_bytes(int64_t blocks) {
  return kCudaUpdateBlockBytes * (blocks + 1);
}

// The largest request of each of the CUDA backend's growing buffers over a run: the kernels'
// scratch, the bf16 copies of a product's A and B operands, and the optimizers' block table.
struct DeviceScratch {
  int64_t scratch = 0;
  int64_t operand_a = 0;
  int64_t operand_b = 0;
  int64_t update_table = 0;
};

}  // namespace gpt
