// LayerNorm layer over the backend's layernorm kernels (see layernorm.h).
#include "layers/layernorm.h"

namespace gpt {

LayerNorm::LayerNorm(const LayerContext& ctx, const std::string& name, int64_t C)
    : Layer(ctx), C_(C), rows_(mb_.Nl) {
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
    p->tp_partial_grad = tp_.sequence_parallel();
  }
  weight_ = &ctx.store.add(std::move(w));
  bias_ = &ctx.store.add(std::move(b));
}

LayerNormCache LayerNorm::make_cache() const {
  return {.mean = {backend_, mb_.ln_stats(), kCache}, .rstd = {backend_, mb_.ln_stats(), kCache}};
}

void LayerNorm::forward(float* out, const float* inp, LayerNormCache& c) {
  c.inp = inp;
  backend_.layernorm_forward(out, c.mean.data(), c.rstd.data(), inp, weight_->value, bias_->value,
                             rows_, C_);
}

LayerNormCache LayerNorm::make_decode_cache() const {
  return {.mean = {backend_, mb_.B, kDecodeStep}, .rstd = {backend_, mb_.B, kDecodeStep}};
}

void LayerNorm::decode(float* out, const float* inp, LayerNormCache& c) {
  c.inp = inp;
  backend_.layernorm_forward(out, c.mean.data(), c.rstd.data(), inp, weight_->value, bias_->value,
                             mb_.B, C_);
}

void LayerNorm::backward_input(float* dinp, const float* dout, const LayerNormCache& c,
                               LayerNormGrads& g) {
  g.dout = dout;
  backend_.layernorm_backward_input(dinp, dout, c.inp, weight_->value, c.mean.data(), c.rstd.data(),
                                    rows_, C_);
}

void LayerNorm::backward_weight(const LayerNormCache& c, const LayerNormGrads& g) {
  backend_.layernorm_backward_weight(weight_->grad, bias_->grad, g.dout, c.inp, c.mean.data(),
                                     c.rstd.data(), rows_, C_);
}

}  // namespace gpt
