// Device helpers shared by the CUDA kernels: fixed-order block and warp reductions, the warp per
// row of the row kernels, and the row chunking of the deterministic column sums (bias, LayerNorm
// and RMSNorm weight gradients).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/cuda_scratch.h"

namespace gpt::cuda {

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// The comparison of the CPU's max loop, so NaN handling stays the same.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

// op over the block's values, returned to every thread. A shared-memory tree with fixed pairs:
// the combination order depends on nothing but kThreads, so results repeat bit for bit.
// kThreads must equal blockDim.x (a power of two), and every thread of the block must call it.
template <int kThreads, typename T, typename Op>
__device__ T block_reduce(T value, Op op) {
  static_assert(kThreads >= 32 && (kThreads & (kThreads - 1)) == 0);
  __shared__ T buf[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  buf[tid] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) buf[tid] = op(buf[tid], buf[tid + stride]);
    __syncthreads();
  }
  const T result = buf[0];
  __syncthreads();  // a second call in the same kernel reuses buf
  return result;
}

// Sum over a full warp by xor butterfly. Lanes i and i^m add the same two values (a + b == b + a
// exactly), so every lane ends with the same bits.
template <typename T>
__device__ T warp_sum(T value) {
  for (int mask = 16; mask > 0; mask /= 2) value += __shfl_xor_sync(0xffffffffu, value, mask);
  return value;
}

// The row kernels (LayerNorm, RMSNorm) give each row one warp: rows are a few thousand channels,
// and warp shuffles need no __syncthreads.
inline constexpr int kWarpRowsPerBlock = 8;
inline constexpr int kWarpRowThreads = 32 * kWarpRowsPerBlock;

inline unsigned warp_row_blocks(int64_t N) {
  return static_cast<unsigned>((N + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock);
}

// The row of this thread's warp.
__device__ inline int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + threadIdx.x / 32;
}

// Column sums cut the N rows into this many chunks whatever the device, so the partial sums and
// their order (hence the result) are the same on every GPU. Partials are doubles, as the CPU's.
inline constexpr int kColumnChunks = static_cast<int>(kCudaColumnChunks);
inline constexpr int kColumnThreads = 128;  // columns per block: one per thread, coalesced

__host__ __device__ inline int64_t column_chunk_rows(int64_t N) {
  return (N + kColumnChunks - 1) / kColumnChunks;
}

// The column of this thread in a column-sum kernel (one column per thread along x).
__device__ inline int64_t column_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// Rows [begin, end) of the N rows: this block's chunk (blockIdx.y) of a column sum's partials.
struct RowChunk {
  int64_t begin, end;
};
__device__ inline RowChunk row_chunk(int64_t N) {
  const int64_t rows = column_chunk_rows(N);
  const int64_t begin = blockIdx.y * rows;
  return {begin, begin + rows < N ? begin + rows : N};
}

// partial (kColumnChunks, C) summed over the chunks, in chunk order, for column c.
__device__ inline double column_partials_total(const double* partial, int64_t C, int64_t c) {
  double total = 0.0;
  for (int k = 0; k < kColumnChunks; k++) total += partial[k * C + c];
  return total;
}

}  // namespace gpt::cuda
