// LayerNorm and RMSNorm layers over the backend's kernels (see layernorm.h).
#include "layers/layernorm.h"

namespace gpt {

LayerNorm::LayerNorm(const LayerContext& ctx, const NormSpec& spec)
    : Layer(ctx),
      C_(spec.C),
      rows_(spec.heads > 0 ? mb_.N * spec.heads : mb_.Nl),
      heads_per_row_(spec.heads > 0 ? spec.heads : 1),
      rms_(spec.rms),
      eps_(spec.eps) {
  const bool partial = spec.heads > 0 ? tp_.size() > 1 : tp_.sequence_parallel();
  const auto add = [&](const std::string& name, InitKind init) {
    ParameterSpec p{};
    p.name = name;
    p.init = init;
    p.shape = {C_};
    p.local_numel = C_;
    p.slabs = {{{0}, {C_}, 0}};
    p.tp_replicated = true;
    p.tp_partial_grad = partial;
    return &ctx.store.add(std::move(p));
  };
  weight_ = add(spec.name + ".weight", InitKind::kOnes);
  if (!rms_) bias_ = add(spec.name + ".bias", InitKind::kZeros);
}

LayerNormCache LayerNorm::make_cache() const {
  return {.mean = {backend_, rms_ ? 0 : rows_, kCache}, .rstd = {backend_, rows_, kCache}};
}

void LayerNorm::run_forward(float* out, const float* inp, LayerNormCache& c, int64_t rows) {
  c.inp = inp;
  if (rms_)
    backend_.rmsnorm_forward(out, c.rstd.data(), inp, weight_->value, rows, C_, eps_);
  else
    backend_.layernorm_forward(out, c.mean.data(), c.rstd.data(), inp, weight_->value, bias_->value,
                               rows, C_);
}

void LayerNorm::forward(float* out, const float* inp, LayerNormCache& c) {
  run_forward(out, inp, c, rows_);
}

LayerNormCache LayerNorm::make_decode_cache(int64_t rows) const {
  const int64_t n = rows * heads_per_row_;
  return {.mean = {backend_, rms_ ? 0 : n, kDecodeStep}, .rstd = {backend_, n, kDecodeStep}};
}

void LayerNorm::decode(float* out, const float* inp, LayerNormCache& c, int64_t rows) {
  run_forward(out, inp, c, rows * heads_per_row_);
}

void LayerNorm::backward_input(float* dinp, const float* dout, const LayerNormCache& c,
                               LayerNormGrads& g) {
  g.dout = dout;
  if (rms_)
    backend_.rmsnorm_backward_input(dinp, dout, c.inp, weight_->value, c.rstd.data(), rows_, C_);
  else
    backend_.layernorm_backward_input(dinp, dout, c.inp, weight_->value, c.mean.data(),
                                      c.rstd.data(), rows_, C_);
}

void LayerNorm::backward_weight(const LayerNormCache& c, const LayerNormGrads& g) {
  if (rms_)
    backend_.rmsnorm_backward_weight(weight_->grad, g.dout, c.inp, c.rstd.data(), rows_, C_);
  else
    backend_.layernorm_backward_weight(weight_->grad, bias_->grad, g.dout, c.inp, c.mean.data(),
                                       c.rstd.data(), rows_, C_);
}

}  // namespace gpt
