// Generation's attention on CUDA: storing keys and values into the per-block cache, and one
// query row per (sequence, head) attending over the cached positions (the decode step). Plain
// and deterministic rather than fast: one block per (sequence, head), a fixed-order block
// reduction for the softmax's max and sum, the scores in global scratch. A decode step reads
// each cached key and value once, so it is bound by memory, not by these kernels' arithmetic.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/grid_stride.cuh"
#include "framework/cuda/kernels.h"
#include "framework/elementwise.h"

namespace gpt::cuda {
namespace {

constexpr int kStoreThreads = 256;
constexpr int kDecodeThreads = 128;
constexpr int kMaxDecodeHeadSize = 256;  // the query row is staged in shared memory

// Every element of the k and v parts of qkv (B,rows,3C) to its place in the caches.
__global__ void kv_store_kernel(float* k_cache, float* v_cache, const float* qkv, int64_t B,
                                int64_t rows, int64_t NH, int64_t HS, int64_t T_max,
                                int64_t start) {
  const int64_t C = NH * HS, n = B * rows * C;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t d = i % HS, h = i / HS % NH, r = i / C % rows, b = i / (C * rows);
    const float* src = qkv + (b * rows + r) * 3 * C + h * HS + d;
    const int64_t dst = ((b * NH + h) * T_max + start + r) * HS + d;
    k_cache[dst] = src[C];
    v_cache[dst] = src[2 * C];
  }
}

// Block bh = b * NH + h: scores over the `length` cached keys (a thread per key, strided), their
// softmax with the block's max and sum, then a thread per output dimension sums p . V.
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(float* out, float* scores, const float* qkv, const float* k_cache,
                            const float* v_cache, int NH, int HS, int64_t T_max, int length,
                            float scale) {
  __shared__ float q[kMaxDecodeHeadSize];
  const int64_t bh = blockIdx.x, b = bh / NH, h = bh % NH, C = static_cast<int64_t>(NH) * HS;
  const int tid = static_cast<int>(threadIdx.x);
  for (int d = tid; d < HS; d += kDecodeThreads) q[d] = qkv[b * 3 * C + h * HS + d];
  __syncthreads();
  const float* k = k_cache + bh * T_max * HS;
  const float* v = v_cache + bh * T_max * HS;
  float* s = scores + bh * T_max;
  float m = -INFINITY;
  for (int t = tid; t < length; t += kDecodeThreads) {
    float dot = 0.0f;
    for (int d = 0; d < HS; d++) dot = fmaf(q[d], k[static_cast<int64_t>(t) * HS + d], dot);
    s[t] = dot * scale;
    m = MaxOp()(m, s[t]);
  }
  m = block_reduce<kDecodeThreads>(m, MaxOp());
  float sum = 0.0f;
  for (int t = tid; t < length; t += kDecodeThreads) {
    const float p = fast_expf(s[t] - m);
    s[t] = p;
    sum += p;
  }
  // The reduction's barriers also make every thread's probabilities visible to the block.
  sum = block_reduce<kDecodeThreads>(sum, SumOp());
  const float inv = 1.0f / sum;
  for (int d = tid; d < HS; d += kDecodeThreads) {
    float acc = 0.0f;
    for (int t = 0; t < length; t++) acc = fmaf(s[t], v[static_cast<int64_t>(t) * HS + d], acc);
    out[b * C + h * HS + d] = acc * inv;
  }
}

}  // namespace

void attention_kv_store(cudaStream_t stream, float* k_cache, float* v_cache, const float* qkv,
                        int64_t B, int64_t rows, int64_t NH, int64_t HS, int64_t T_max,
                        int64_t start) {
  GPT_CHECK(start >= 0 && rows >= 0 && start + rows <= T_max, "attention_kv_store of positions ["
                                                                  << start << ", " << start + rows
                                                                  << ") into a cache of " << T_max);
  const int64_t n = B * rows * NH * HS;
  if (n <= 0) return;
  kv_store_kernel<<<grid_for(n, kStoreThreads), kStoreThreads, 0, stream>>>(
      k_cache, v_cache, qkv, B, rows, NH, HS, T_max, start);
  GPT_CUDA_CHECK_LAUNCH();
}

void attention_decode(cudaStream_t stream, float* out, float* scores, const float* qkv,
                      const float* k_cache, const float* v_cache, int64_t B, int64_t NH, int64_t HS,
                      int64_t T_max, int64_t length) {
  GPT_CHECK(length >= 1 && length <= T_max && T_max < (int64_t{1} << 31),
            "attention_decode over " << length << " positions of a cache of " << T_max);
  GPT_CHECK(HS >= 1 && HS <= kMaxDecodeHeadSize, "attention_decode takes head sizes up to "
                                                     << kMaxDecodeHeadSize << " (got " << HS
                                                     << ")");
  if (B * NH <= 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  attention_decode_kernel<<<static_cast<unsigned>(B * NH), kDecodeThreads, 0, stream>>>(
      out, scores, qkv, k_cache, v_cache, static_cast<int>(NH), static_cast<int>(HS), T_max,
      static_cast<int>(length), scale);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
