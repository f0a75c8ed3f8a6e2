// Deterministic reductions of the CUDA backend: column sums over a fixed number of row chunks,
// and whole-buffer sums in double over a fixed grid. Partials are combined in a fixed order.
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

// The whole-buffer sums always run this grid, whatever n and the device: same partials, same
// order, same bits.
constexpr int kSumBlocks = static_cast<int>(kCudaSumBlocks);
constexpr int kSumThreads = 256;

// partial[k*C + c] = sum of x[n*C + c] over the rows n of chunk k (0 for an empty chunk).
__global__ void column_partials_kernel(double* partial, const float* x, int64_t N, int64_t C) {
  const int64_t c = column_index();
  if (c >= C) return;
  const RowChunk rows = row_chunk(N);
  double acc = 0.0;
  for (int64_t n = rows.begin; n < rows.end; n++) acc += x[n * C + c];
  partial[blockIdx.y * C + c] = acc;
}

__global__ void column_sum_finish_kernel(float* dcol, const double* partial, int64_t C) {
  const int64_t c = column_index();
  if (c >= C) return;
  dcol[c] = static_cast<float>(dcol[c] + column_partials_total(partial, C, c));
}

template <bool kSquares>
__global__ void full_sum_partials_kernel(double* partial, const float* x, int64_t n) {
  double acc = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double v = x[i];
    acc += kSquares ? v * v : v;
  }
  acc = block_reduce<kSumThreads>(acc, SumOp{});
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block of kSumBlocks threads, one partial each.
__global__ void full_sum_finish_kernel(double* result, const double* partial) {
  const double total = block_reduce<kSumBlocks>(partial[threadIdx.x], SumOp{});
  if (threadIdx.x == 0) *result = total;
}

template <bool kSquares>
void full_sum(cudaStream_t stream, double* result, const float* x, int64_t n, void* scratch) {
  GPT_CHECK(n >= 0, "sum over a negative count " << n);
  // Launched for n == 0 as well: *result must still become 0.
  double* partial = static_cast<double*>(scratch);
  full_sum_partials_kernel<kSquares><<<kSumBlocks, kSumThreads, 0, stream>>>(partial, x, n);
  GPT_CUDA_CHECK_LAUNCH();
  full_sum_finish_kernel<<<1, kSumBlocks, 0, stream>>>(result, partial);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t column_sum_scratch_bytes(int64_t /*N*/, int64_t C) {
  return static_cast<size_t>(cuda_column_sum_scratch_bytes(C));
}

void column_sum_accumulate(cudaStream_t stream, float* dcol, const float* x, int64_t N, int64_t C,
                           void* scratch) {
  GPT_CHECK(N >= 0 && C >= 0, "column_sum_accumulate with N=" << N << " C=" << C);
  if (N == 0 || C == 0) return;
  double* partial = static_cast<double*>(scratch);
  const unsigned column_blocks = static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads);
  column_partials_kernel<<<dim3(column_blocks, kColumnChunks), kColumnThreads, 0, stream>>>(
      partial, x, N, C);
  GPT_CUDA_CHECK_LAUNCH();
  column_partials_accumulate(stream, dcol, partial, C);
}

void column_partials_accumulate(cudaStream_t stream, float* dcol, const double* partial,
                                int64_t C) {
  if (C == 0) return;
  const unsigned column_blocks = static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads);
  column_sum_finish_kernel<<<column_blocks, kColumnThreads, 0, stream>>>(dcol, partial, C);
  GPT_CUDA_CHECK_LAUNCH();
}

size_t full_sum_scratch_bytes() {
  return static_cast<size_t>(cuda_full_sum_scratch_bytes());
}

void sum(cudaStream_t stream, double* result, const float* x, int64_t n, void* scratch) {
  full_sum<false>(stream, result, x, n, scratch);
}

void sum_squares(cudaStream_t stream, double* result, const float* x, int64_t n, void* scratch) {
  full_sum<true>(stream, result, x, n, scratch);
}

}  // namespace gpt::cuda
