// Causal self-attention, tp-split by heads. GPT-2: c_attn is one column-parallel linear whose q,
// k and v each keep this rank's NH/tp heads, rows [q | k | v]. Llama family: q_proj, k_proj and
// v_proj are the parts of one column-parallel layer (NH/tp query heads, NKV/tp key/value heads,
// kept as three blocks), with Qwen3's per-head RMSNorm of q and k, then rotary positions on q and
// k, then grouped-query attention (query head h reads kv head h / (NH/NKV)). The attention core
// runs on local heads only; c_proj / o_proj is row-parallel with one all-reduce forward. Backward:
// one all-reduce of the input gradient. Generation adds a key/value cache (KvCache): a window's
// forward stores the keys and values of its positions, then each new token runs one row per
// sequence (decode) attending over the cache.
#pragma once

#include <string>

#include "framework/config.h"
#include "framework/families/model_family.h"
#include "layers/column_parallel_linear.h"
#include "layers/decode_rows.h"
#include "layers/layernorm.h"
#include "layers/row_parallel_linear.h"

namespace gpt {

struct AttentionCache {
  ColumnParallelLinearCache c_attn;  // its input, all N rows
  DeviceArray<float> qkv;            // (N, q + 2 kv local channels): q, k, v of the local heads
  DeviceArray<float> qk_pre;         // Qwen3: q and k before their norms (qkv's first two parts)
  LayerNormCache q_norm, k_norm;     // Qwen3
  DeviceArray<float> att;            // the backend's attention cache (attention_cache_floats)
  DeviceArray<float> atty;           // (N,NH*HS/tp) attention output, c_proj's input
  RowParallelLinearCache c_proj;
};

// Generation's keys and values of one block for this rank's kv heads, (B, NKV/tp, T, HS) each:
// every position so far of every sequence (T = seq_len).
// The paged key/value pool of one layer on this rank: (blocks, local kv heads, block_tokens,
// head_dim) each (Backend::paged_kv_store).
struct KvCache {
  DeviceArray<float> k;
  DeviceArray<float> v;
};

struct AttentionGrads {
  RowParallelLinearGrads c_proj;  // the output gradient, all N rows
  DeviceArray<float> dqkv;        // c_attn's output gradient, shaped as qkv
  DeviceArray<float> dqk_normed;  // Qwen3: the q and k norms' output gradients
  LayerNormGrads q_norm, k_norm;
  ColumnParallelLinearGrads c_attn;
};

class Attention : Layer {
 public:
  // The block's parameters and description (the model family's); rotary: the stage's table
  // (rotary_table.h) for rotary positions.
  Attention(const LayerContext& ctx, const ModelConfig& cfg, const BlockParameters& p,
            const BlockDescription& d, const float* rotary);
  AttentionCache make_cache() const;
  AttentionGrads make_grads() const;

  // out (Nl,C) = c_proj(attention(c_attn(inp (Nl,C)))), reduced over tp.
  void forward(float* out, const float* inp, AttentionCache& cache);
  // dinp (Nl,C) = the input gradient of dout (Nl,C), reduced over tp. column_weights: c_attn's
  // weight half too, behind its tp reduction (then backward_weight skips it: column_weights_done).
  void backward_input(float* dinp, const float* dout, const AttentionCache& cache,
                      AttentionGrads& grads, bool column_weights = false);
  void backward_weight(const AttentionCache& cache, const AttentionGrads& grads,
                       bool column_weights_done = false);

  // Generation (decode_rows.h). A cache for decode (qkv and atty of `rows` rows, att the step's
  // scores over at most max_positions), and this rank's paged key/value pool.
  AttentionCache make_decode_cache(int64_t rows, int64_t max_positions) const;
  KvCache make_kv_cache(int64_t blocks, int64_t block_tokens) const;
  // out (R,C) for R token rows inp (R,C): each row's key and value join the pool at its slot,
  // then its query attends over its sequence's positions 0..its own.
  void decode(float* out, const float* inp, AttentionCache& cache, KvCache& kv,
              const DecodeRows& rows);

 private:
  // q, k and v in a qkv-shaped buffer of `rows` token rows: within each row (GPT-2's fused
  // projection) or blocks of rows; F is const float for a cached buffer read only.
  template <typename F>
  struct Qkv {
    F* q;
    F* k;
    F* v;
  };
  template <typename F>
  Qkv<F> split(F* qkv, int64_t rows) const {
    const int64_t q = local_heads_ * head_dim_, kv = local_kv_heads_ * head_dim_;
    if (fused_) return {qkv, qkv + q, qkv + 2 * q};
    return {qkv, qkv + rows * q, qkv + rows * (q + kv)};
  }
  AttentionShape shape(int64_t T) const;  // of B sequences of T positions
  // Of R token rows over the paged pool (B = R, T = block_tokens).
  AttentionShape decode_shape(int64_t rows, int64_t block_tokens) const;
  // The Llama family's steps between the projection and the attention core: Qwen3's norms, then
  // the rotation of q and k; on the microbatch's B sequences of T positions, or on a decode
  // step's rows, each at its own position.
  void prepare_qk(float* qkv, AttentionCache& cache);
  void prepare_decode_qk(float* qkv, AttentionCache& cache, const DecodeRows& rows);

  bool fused_;  // GPT-2's c_attn
  int64_t local_heads_, local_kv_heads_, head_dim_;
  const float* rotary_;
  ColumnParallelLinear c_attn_;
  std::unique_ptr<LayerNorm> q_norm_, k_norm_;
  RowParallelLinear c_proj_;
};

}  // namespace gpt
