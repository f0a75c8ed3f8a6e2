// The batch-invariant product of generation and serving on CUDA (Backend::matmul_forward_rows).
// Not cuBLASLt: it chooses its kernel, tiling and split of the inner dimension by shape, so a row
// multiplied alone or among 63 others may be summed in another order and differ in the last bit,
// and a server's token would then depend on which requests shared its step. Here every output
// element is one warp's dot product in one fixed order: lane j sums the products k = j, j + 32,
// ... in order with fused multiply-adds, the lanes are then added by a fixed xor butterfly
// (warp_sum) and the bias last. Which warp computes an element, how many rows it carries and the
// grid's size change none of those operations, so an element's bits depend only on its own row
// and weight column, whatever R and wherever the row sits among them. Float32 whatever the
// backend's precision: no bf16 rounding of the operands.
#include <cuda_runtime.h>

#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/grid_stride.cuh"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {
namespace {

constexpr int kWarps = 8;  // output columns per block, a warp each
constexpr int kThreads = 32 * kWarps;
// Rows a warp carries through one pass over its weight row: each weight it loads serves them all.
constexpr int kRowsPerPass = 4;
// Rows per blockIdx.y: a long R is spread over more blocks instead of looping in one warp.
constexpr int64_t kRowChunk = 64;

// Warp w of the grid: output columns w, w + warps, ... of the rows of chunk blockIdx.y,
// kRowsPerPass at a time. A pass past the chunk's last row repeats that row and drops the result,
// so every lane of the warp runs the same shuffles.
__global__ void __launch_bounds__(kThreads)
    matmul_rows_kernel(float* out, const float* inp, const float* weight, const float* bias,
                       int64_t R, int64_t IC, int64_t OC) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * kRowChunk;
  const int64_t r_end = r_begin + kRowChunk < R ? r_begin + kRowChunk : R;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; o < OC;
       o += warps) {
    const float* w = weight + o * IC;
    for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowsPerPass) {
      const float* a[kRowsPerPass];
      float acc[kRowsPerPass];
#pragma unroll
      for (int i = 0; i < kRowsPerPass; i++) {
        const int64_t r = r0 + i < r_end ? r0 + i : r_end - 1;
        a[i] = inp + r * IC;
        acc[i] = 0.0f;
      }
      for (int64_t k = lane; k < IC; k += 32) {
        const float wk = w[k];
#pragma unroll
        for (int i = 0; i < kRowsPerPass; i++) acc[i] = fmaf(a[i][k], wk, acc[i]);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerPass; i++) {
        const float dot = warp_sum(acc[i]);
        if (lane == 0 && r0 + i < r_end)
          out[(r0 + i) * OC + o] = bias != nullptr ? dot + bias[o] : dot;
      }
    }
  }
}

}  // namespace

void matmul_forward_rows(cudaStream_t stream, float* out, const float* inp, const float* weight,
                         const float* bias, int64_t R, int64_t IC, int64_t OC) {
  GPT_CHECK(R >= 0 && IC > 0 && OC > 0,
            "matmul_forward_rows with R=" << R << " IC=" << IC << " OC=" << OC);
  const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
  GPT_CHECK(chunks < 65536,
            "matmul_forward_rows of " << R << " rows (at most " << 65535 * kRowChunk << ")");
  if (R == 0) return;
  const dim3 grid(grid_for(OC, kWarps), static_cast<unsigned>(chunks));
  matmul_rows_kernel<<<grid, kThreads, 0, stream>>>(out, inp, weight, bias, R, IC, OC);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
