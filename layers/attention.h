// Causal multi-head self-attention, tp-split by heads: c_attn is column-parallel (each of q, k
// and v keeps this rank's NH/tp heads), the attention core runs on local heads only, c_proj is
// row-parallel with one all-reduce forward. Backward: one all-reduce of the c_attn input gradient.
#pragma once

#include <string>

#include "framework/config.h"
#include "layers/linear.h"

namespace gpt {

// What the backward reads, one per in-flight microbatch.
struct AttentionCache {
  float* qkv;   // (N, 3*C/tp)  c_attn output: [q | k | v] of the local heads
  float* att;   // the backend's attention cache (attention_cache_floats)
  float* atty;  // (N, C/tp) attention output before c_proj
};

class Attention {
 public:
  Attention(ParameterStore& store, TensorParallel& tp, const std::string& name,
            const ModelConfig& cfg);
  int64_t local_heads() const { return local_heads_; }
  int64_t local_channels() const { return local_heads_ * head_dim_; }

  // out = c_proj(attention(c_attn(inp))), reduced over tp. Without sequence parallelism inp and
  // out are (N,C); with it they hold this rank's rows, inp_full (N,C) receives the gathered
  // input and partial (N,C) is scratch (see Linear).
  void forward(float* out, const float* inp, float* inp_full, float* partial,
               const AttentionCache& cache, int64_t B, int64_t T);
  // dqkv (N,3C/tp) keeps c_attn's output gradient for the weight half; dinp is written, reduced
  // over tp. datty (N,C/tp), datt (attention scratch) and partial (N,C) are scratch; with sequence
  // parallelism dout holds this rank's rows and dout_full (N,C) receives them all.
  void backward_input(float* dinp, float* dqkv, float* datty, float* datt, const float* dout,
                      float* dout_full, float* partial, const AttentionCache& cache, int64_t B,
                      int64_t T);
  // From the full-row dout and inp (what backward_input and forward left in dout_full and
  // inp_full with sequence parallelism).
  void backward_weight(const float* dout_full, const float* dqkv, const float* inp_full,
                       const AttentionCache& cache, int64_t N);

 private:
  Backend& backend_;
  int64_t local_heads_, head_dim_;
  Linear c_attn_, c_proj_;
};

}  // namespace gpt
