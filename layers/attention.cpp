// Attention sublayer (see attention.h).
#include "layers/attention.h"

#include <cmath>

#include "framework/check.h"

namespace gpt {

Attention::Attention(ParameterStore& store, TensorParallel& tp, const std::string& name,
                     const ModelConfig& cfg)
    : backend_(store.backend()),
      local_heads_(cfg.n_head / tp.size()),
      head_dim_(cfg.head_dim()),
      c_attn_(store, tp, name + ".c_attn", cfg.d_model, 3 * cfg.d_model, LinearSplit::kColumn,
              0.02f, 3),
      c_proj_(store, tp, name + ".c_proj", cfg.d_model, cfg.d_model, LinearSplit::kRow,
              0.02f / std::sqrt(2.0f * static_cast<float>(cfg.n_layer))) {
  GPT_CHECK(cfg.n_head % tp.size() == 0, "tp does not divide the heads");
}

void Attention::forward(float* out, const float* inp, float* inp_full, float* partial,
                        const AttentionCache& cache, int64_t B, int64_t T) {
  const int64_t N = B * T;
  c_attn_.forward(cache.qkv, inp, N, inp_full);
  backend_.attention_forward(cache.atty, cache.att, cache.qkv, B, T, local_heads_, head_dim_);
  c_proj_.forward(out, cache.atty, N, partial);
}

void Attention::backward_input(float* dinp, float* dqkv, float* datty, float* datt,
                               const float* dout, float* dout_full, float* partial,
                               const AttentionCache& cache, int64_t B, int64_t T) {
  const int64_t N = B * T;
  c_proj_.backward_input(datty, dout, N, dout_full);
  backend_.attention_backward(dqkv, datt, datty, cache.atty, cache.qkv, cache.att, B, T,
                              local_heads_, head_dim_);
  c_attn_.backward_input(dinp, dqkv, N, partial);
}

void Attention::backward_weight(const float* dout_full, const float* dqkv, const float* inp_full,
                                const AttentionCache& cache, int64_t N) {
  c_proj_.backward_weight(dout_full, cache.atty, N);
  c_attn_.backward_weight(dqkv, inp_full, N);
}

}  // namespace gpt
