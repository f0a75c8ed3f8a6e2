// Causal multi-head self-attention, tp-split by heads: c_attn is column-parallel (each of q, k
// and v keeps this rank's NH/tp heads), the attention core runs on local heads only, c_proj is
// row-parallel with one all-reduce forward. Backward: one all-reduce of the c_attn input gradient.
// Generation adds a key/value cache (KvCache): a window's forward stores the keys and values of its
// positions, then each new token runs one row per sequence (decode) attending over the cache.
#pragma once

#include <string>

#include "framework/config.h"
#include "layers/column_parallel_linear.h"
#include "layers/row_parallel_linear.h"

namespace gpt {

struct AttentionCache {
  ColumnParallelLinearCache c_attn;  // its input, all N rows
  DeviceArray<float> qkv;            // (N,3C/tp) c_attn's output: [q | k | v] of the local heads
  DeviceArray<float> att;            // the backend's attention cache (attention_cache_floats)
  DeviceArray<float> atty;           // (N,C/tp) attention output, c_proj's input
  RowParallelLinearCache c_proj;
};

// Generation's keys and values of one block for this rank's NH/tp heads, (B, NH/tp, T, HS) each:
// every position so far of every sequence (T = seq_len, the learned positions).
struct KvCache {
  DeviceArray<float> k;
  DeviceArray<float> v;
};

struct AttentionGrads {
  RowParallelLinearGrads c_proj;  // the output gradient, all N rows
  DeviceArray<float> dqkv;        // (N,3C/tp) c_attn's output gradient
  ColumnParallelLinearGrads c_attn;
};

class Attention : Layer {
 public:
  Attention(const LayerContext& ctx, const std::string& name, const ModelConfig& cfg);
  AttentionCache make_cache() const;
  AttentionGrads make_grads() const;

  // out (Nl,C) = c_proj(attention(c_attn(inp (Nl,C)))), reduced over tp.
  void forward(float* out, const float* inp, AttentionCache& cache);
  // dinp (Nl,C) = the input gradient of dout (Nl,C), reduced over tp.
  void backward_input(float* dinp, const float* dout, const AttentionCache& cache,
                      AttentionGrads& grads);
  void backward_weight(const AttentionCache& cache, const AttentionGrads& grads);

  // Generation. A cache for decode (qkv and atty of B rows, att the step's scores), the key/value
  // cache, and storing the keys and values of positions 0..T-1 that forward left in `cache`.
  AttentionCache make_decode_cache() const;
  KvCache make_kv_cache() const;
  void store_keys_values(KvCache& kv, const AttentionCache& cache);
  // out (B,C) for the new row inp (B,C) of each sequence at position pos (< T): its key and value
  // join kv, its query attends over positions 0..pos.
  void decode(float* out, const float* inp, AttentionCache& cache, KvCache& kv, int64_t pos);

 private:
  int64_t local_heads_, head_dim_;
  ColumnParallelLinear c_attn_;
  RowParallelLinear c_proj_;
};

}  // namespace gpt
