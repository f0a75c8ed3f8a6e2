// Generation's and serving's attention on CUDA over the paged key/value cache: storing each row's
// keys and values into its slot of the block pools, and one query row per (row, query head)
// attending over its own sequence's positions, read block by block through that row's block table
// (grouped-query as attention.cu). Plain and deterministic rather than fast: one thread block per
// (row, query head), a fixed-order block reduction for the softmax's max and sum, the scores in
// global scratch. Nothing a block computes depends on the other rows of the launch, so a row's
// result is the same however many rows share the call (batch invariance). A decode step reads
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

// Every element of the NKV heads of the R rows of k and v (rows of kv_stride) to the pool
// position slots[r]: block slot / block_tokens, offset slot % block_tokens. The slots are device
// memory the host never sees, so a negative one cannot be reported: its row is skipped rather
// than written before the pools.
__global__ void paged_kv_store_kernel(float* k_pool, float* v_pool, const float* k, const float* v,
                                      const int32_t* slots, int64_t R, int64_t NKV, int64_t HS,
                                      int64_t kv_stride, int64_t block_tokens) {
  const int64_t C = NKV * HS, n = R * C;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t d = i % HS, g = i / HS % NKV, r = i / C;
    const int64_t slot = slots[r];
    if (slot < 0) continue;
    const int64_t block = slot / block_tokens, offset = slot % block_tokens;
    const int64_t src = r * kv_stride + g * HS + d;
    const int64_t dst = ((block * NKV + g) * block_tokens + offset) * HS + d;
    k_pool[dst] = k[src];
    v_pool[dst] = v[src];
  }
}

// The first float of position t of kv head `head_offset` in a pool, through a row's block table.
__device__ inline const float* pool_position(const float* pool, const int32_t* table, int64_t t,
                                             int64_t block_tokens, int64_t block_floats,
                                             int64_t head_offset, int64_t HS) {
  return pool + table[t / block_tokens] * block_floats + head_offset + (t % block_tokens) * HS;
}

// Block rh = r * NH + h: scores over the lengths[r] positions of kv head h / group (a thread per
// position, strided), their softmax with the block's max and sum, then a thread per output
// dimension sums p . V in position order. A length outside [1, max_blocks * block_tokens] (the
// CPU backend throws; here it is device memory) gives a NaN row instead of reads past the table.
__global__ void __launch_bounds__(kDecodeThreads)
    paged_attention_decode_kernel(float* out, float* scores, const float* q_all,
                                  const float* k_pool, const float* v_pool,
                                  const int32_t* block_tables, const int32_t* lengths, int NH,
                                  int group, int HS, int64_t q_stride, int64_t block_tokens,
                                  int64_t max_blocks, float scale) {
  __shared__ float q[kMaxDecodeHeadSize];
  const int64_t rh = blockIdx.x, r = rh / NH, h = rh % NH, C = static_cast<int64_t>(NH) * HS;
  const int64_t max_positions = max_blocks * block_tokens;
  const int tid = static_cast<int>(threadIdx.x);
  float* o = out + r * C + h * HS;
  // The same value for every thread, so the whole block leaves before any barrier.
  const int64_t length = lengths[r];
  if (length < 1 || length > max_positions) {
    for (int d = tid; d < HS; d += kDecodeThreads) o[d] = NAN;
    return;
  }
  for (int d = tid; d < HS; d += kDecodeThreads) q[d] = q_all[r * q_stride + h * HS + d];
  __syncthreads();
  const int32_t* table = block_tables + r * max_blocks;
  const int64_t block_floats = static_cast<int64_t>(NH / group) * block_tokens * HS;
  const int64_t head_offset = static_cast<int64_t>(h / group) * block_tokens * HS;
  float* s = scores + rh * max_positions;
  float m = -INFINITY;
  for (int64_t t = tid; t < length; t += kDecodeThreads) {
    const float* key = pool_position(k_pool, table, t, block_tokens, block_floats, head_offset, HS);
    float dot = 0.0f;
    for (int d = 0; d < HS; d++) dot = fmaf(q[d], key[d], dot);
    s[t] = dot * scale;
    m = MaxOp()(m, s[t]);
  }
  m = block_reduce<kDecodeThreads>(m, MaxOp());
  float sum = 0.0f;
  for (int64_t t = tid; t < length; t += kDecodeThreads) {
    const float p = fast_expf(s[t] - m);
    s[t] = p;
    sum += p;
  }
  // The reduction's barriers also make every thread's probabilities visible to the block.
  sum = block_reduce<kDecodeThreads>(sum, SumOp());
  const float inv = 1.0f / sum;
  for (int d = tid; d < HS; d += kDecodeThreads) {
    float acc = 0.0f;
    // Block by block, so the table is read once per block rather than once per position.
    for (int64_t b = 0, t = 0; t < length; b++) {
      const float* value = v_pool + table[b] * block_floats + head_offset + d;
      const int64_t end = t + block_tokens < length ? t + block_tokens : length;
      for (int64_t offset = 0; t < end; t++, offset++) acc = fmaf(s[t], value[offset * HS], acc);
    }
    o[d] = acc * inv;
  }
}

}  // namespace

void paged_kv_store(cudaStream_t stream, float* k_pool, float* v_pool, const float* k,
                    const float* v, const AttentionShape& shape, const int32_t* slots) {
  check_attention_shape(shape, "paged_kv_store");
  GPT_CHECK(shape.T > 0, "paged_kv_store with blocks of " << shape.T << " positions");
  const int64_t n = shape.B * shape.NKV * shape.HS;
  if (n <= 0) return;
  paged_kv_store_kernel<<<grid_for(n, kStoreThreads), kStoreThreads, 0, stream>>>(
      k_pool, v_pool, k, v, slots, shape.B, shape.NKV, shape.HS, shape.kv_stride, shape.T);
  GPT_CUDA_CHECK_LAUNCH();
}

void paged_attention_decode(cudaStream_t stream, float* out, float* scores, const float* q,
                            const float* k_pool, const float* v_pool, const AttentionShape& shape,
                            const int32_t* block_tables, int64_t max_blocks,
                            const int32_t* lengths) {
  check_attention_shape(shape, "paged_attention_decode");
  GPT_CHECK(shape.T > 0 && max_blocks > 0 && max_blocks * shape.T < (int64_t{1} << 31),
            "paged_attention_decode over tables of " << max_blocks << " blocks of " << shape.T
                                                     << " positions");
  GPT_CHECK(shape.HS >= 1 && shape.HS <= kMaxDecodeHeadSize,
            "paged_attention_decode takes head sizes up to " << kMaxDecodeHeadSize << " (got "
                                                             << shape.HS << ")");
  GPT_CHECK(shape.B * shape.NH < (int64_t{1} << 31),
            "paged_attention_decode of " << shape.B << " rows of " << shape.NH << " heads");
  if (shape.B * shape.NH <= 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.HS));
  paged_attention_decode_kernel<<<static_cast<unsigned>(shape.B * shape.NH), kDecodeThreads, 0,
                                  stream>>>(
      out, scores, q, k_pool, v_pool, block_tables, lengths, static_cast<int>(shape.NH),
      static_cast<int>(shape.NH / shape.NKV), static_cast<int>(shape.HS), shape.q_stride, shape.T,
      max_blocks, scale);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
