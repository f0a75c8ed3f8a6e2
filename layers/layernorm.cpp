// LayerNorm layer over the backend's layernorm kernels (see layernorm.h).
#include "layers/layernorm.h"

namespace gpt {

LayerNorm::LayerNorm(ParameterStore& store, const std::string& name, int64_t C,
                     bool sequence_parallel, int tp_size)
    : backend_(store.backend()), C_(C), row_split_(sequence_parallel ? tp_size : 1) {
  ParameterSpec w{}, b{};
  w.name = name + ".weight";
  w.init = InitKind::kOnes;
  b.name = name + ".bias";
  b.init = InitKind::kZeros;
  for (ParameterSpec* p : {&w, &b}) {
    p->shape = {C};
    p->local_numel = C;
    p->slabs = {{{0}, {C}, 0}};
    p->tp_replicated = true;
    p->tp_partial_grad = sequence_parallel;
  }
  weight_ = &store.add(std::move(w));
  bias_ = &store.add(std::move(b));
}

void LayerNorm::forward(float* out, const LayerNormCache& cache, const float* inp, int64_t N) {
  backend_.layernorm_forward(out, cache.mean, cache.rstd, inp, weight_->value, bias_->value, N, C_);
}

void LayerNorm::backward_input(float* dinp, const float* dout, const float* inp,
                               const LayerNormCache& cache, int64_t N) {
  backend_.layernorm_backward_input(dinp, dout, inp, weight_->value, cache.mean, cache.rstd, N, C_);
}

void LayerNorm::backward_weight(const float* dout, const float* inp, const LayerNormCache& cache,
                                int64_t N) {
  backend_.layernorm_backward_weight(weight_->grad, bias_->grad, dout, inp, cache.mean, cache.rstd,
                                     N, C_);
}

}  // namespace gpt
