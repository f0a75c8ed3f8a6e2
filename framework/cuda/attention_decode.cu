// Generation's attention on CUDA: storing keys and values into the per-block cache (one entry per
// kv head), and one query row per (sequence, query head) attending over its kv head's cached
// positions (the decode step, grouped-query as attention.cu). Plain and deterministic rather than
// fast: one block per (sequence, query head), a fixed-order block reduction for the softmax's max
// and sum, the scores in global scratch. A decode step reads each cached key and value once, so it
// is bound by memory, not by these kernels' arithmetic.
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

// Every element of the NKV heads of k and v (B,rows,kv_stride) to its place in the caches.
__global__ void kv_store_kernel(float* k_cache, float* v_cache, const float* k, const float* v,
                                int64_t B, int64_t rows, int64_t NKV, int64_t HS, int64_t kv_stride,
                                int64_t T_max, int64_t start) {
  const int64_t C = NKV * HS, n = B * rows * C;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t d = i % HS, g = i / HS % NKV, r = i / C % rows, b = i / (C * rows);
    const int64_t src = (b * rows + r) * kv_stride + g * HS + d;
    const int64_t dst = ((b * NKV + g) * T_max + start + r) * HS + d;
    k_cache[dst] = k[src];
    v_cache[dst] = v[src];
  }
}

// Block bh = b * NH + h: scores over the `length` cached keys of kv head h / group (a thread per
// key, strided), their softmax with the block's max and sum, then a thread per output dimension
// sums p . V.
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(float* out, float* scores, const float* q_all, const float* k_cache,
                            const float* v_cache, int NH, int group, int HS, int64_t q_stride,
                            int64_t T_max, int length, float scale) {
  __shared__ float q[kMaxDecodeHeadSize];
  const int64_t bh = blockIdx.x, b = bh / NH, h = bh % NH, C = static_cast<int64_t>(NH) * HS;
  const int64_t cached = (b * (NH / group) + h / group) * T_max * HS;  // its (b, kv head)
  const int tid = static_cast<int>(threadIdx.x);
  for (int d = tid; d < HS; d += kDecodeThreads) q[d] = q_all[b * q_stride + h * HS + d];
  __syncthreads();
  const float* k = k_cache + cached;
  const float* v = v_cache + cached;
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

void attention_kv_store(cudaStream_t stream, float* k_cache, float* v_cache, const float* k,
                        const float* v, const AttentionShape& shape, int64_t rows, int64_t start) {
  check_attention_shape(shape, "attention_kv_store");
  GPT_CHECK(start >= 0 && rows >= 0 && start + rows <= shape.T,
            "attention_kv_store of positions [" << start << ", " << start + rows
                                                << ") into a cache of " << shape.T);
  const int64_t n = shape.B * rows * shape.NKV * shape.HS;
  if (n <= 0) return;
  kv_store_kernel<<<grid_for(n, kStoreThreads), kStoreThreads, 0, stream>>>(
      k_cache, v_cache, k, v, shape.B, rows, shape.NKV, shape.HS, shape.kv_stride, shape.T, start);
  GPT_CUDA_CHECK_LAUNCH();
}

void attention_decode(cudaStream_t stream, float* out, float* scores, const float* q,
                      const float* k_cache, const float* v_cache, const AttentionShape& shape,
                      int64_t length) {
  check_attention_shape(shape, "attention_decode");
  GPT_CHECK(length >= 1 && length <= shape.T && shape.T < (int64_t{1} << 31),
            "attention_decode over " << length << " positions of a cache of " << shape.T);
  GPT_CHECK(shape.HS >= 1 && shape.HS <= kMaxDecodeHeadSize,
            "attention_decode takes head sizes up to " << kMaxDecodeHeadSize << " (got " << shape.HS
                                                       << ")");
  if (shape.B * shape.NH <= 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.HS));
  attention_decode_kernel<<<static_cast<unsigned>(shape.B * shape.NH), kDecodeThreads, 0, stream>>>(
      out, scores, q, k_cache, v_cache, static_cast<int>(shape.NH),
      static_cast<int>(shape.NH / shape.NKV), static_cast<int>(shape.HS), shape.q_stride, shape.T,
      static_cast<int>(length), scale);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
