// MLP sublayer (see mlp.h).
#include "layers/mlp.h"

#include <cmath>

namespace gpt {

Mlp::Mlp(ParameterStore& store, TensorParallel& tp, const std::string& name, const ModelConfig& cfg)
    : backend_(store.backend()),
      c_fc_(store, tp, name + ".c_fc", cfg.d_model, cfg.ffn_dim(), LinearSplit::kColumn, 0.02f),
      c_proj_(store, tp, name + ".c_proj", cfg.ffn_dim(), cfg.d_model, LinearSplit::kRow,
              0.02f / std::sqrt(2.0f * static_cast<float>(cfg.n_layer))) {}

void Mlp::forward(float* out, const float* inp, float* inp_full, float* partial,
                  const MlpCache& cache, int64_t N) {
  c_fc_.forward(cache.fc_pre, inp, N, inp_full);
  backend_.gelu_forward(cache.fc_act, cache.fc_pre, N * local_ffn());
  c_proj_.forward(out, cache.fc_act, N, partial);
}

void Mlp::backward_input(float* dinp, float* dfc_pre, float* dfc_act, const float* dout,
                         float* dout_full, float* partial, const MlpCache& cache, int64_t N) {
  c_proj_.backward_input(dfc_act, dout, N, dout_full);
  backend_.gelu_backward(dfc_pre, dfc_act, cache.fc_pre, N * local_ffn());
  c_fc_.backward_input(dinp, dfc_pre, N, partial);
}

void Mlp::backward_weight(const float* dout_full, const float* dfc_pre, const float* inp_full,
                          const MlpCache& cache, int64_t N) {
  c_proj_.backward_weight(dout_full, cache.fc_act, N);
  c_fc_.backward_weight(dfc_pre, inp_full, N);
}

}  // namespace gpt
