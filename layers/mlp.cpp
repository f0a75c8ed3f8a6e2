// MLP sublayer (see mlp.h).
#include "layers/mlp.h"

#include "framework/check.h"

namespace gpt {

Mlp::Mlp(const LayerContext& ctx, const BlockParameters& p, const BlockDescription& d)
    : Layer(ctx),
      swiglu_(d.swiglu()),
      local_ffn_(p.mlp_out.in_features / ctx.tp.size()),
      c_fc_(ctx, p.mlp_in),
      c_proj_(ctx, p.mlp_out) {
  GPT_CHECK(p.mlp_in.size() == (swiglu_ ? 2u : 1u),
            "an MLP of this block description is not "
            "implemented");
}

MlpCache Mlp::make_cache() const {
  return {.c_fc = c_fc_.make_cache(),
          .fc_pre = {backend_, mb_.ffn_in(), kCache},
          .fc_act = {backend_, mb_.ffn(), kCache},
          .c_proj = c_proj_.make_cache()};
}

MlpGrads Mlp::make_grads() const {
  return {.c_proj = c_proj_.make_grads(),
          .dfc_pre = {backend_, mb_.ffn_in(), kCache},
          .c_fc = c_fc_.make_grads()};
}

void Mlp::activate(float* act, const float* pre, int64_t rows) {
  const int64_t n = rows * local_ffn_;
  if (swiglu_)
    backend_.swiglu_forward(act, pre, pre + n, n);
  else
    backend_.gelu_forward(act, pre, n);
}

void Mlp::forward(float* out, const float* inp, MlpCache& c) {
  c_fc_.forward(c.fc_pre.data(), inp, c.c_fc);
  activate(c.fc_act.data(), c.fc_pre.data(), mb_.N);
  c_proj_.forward(out, c.fc_act.data(), c.c_proj);
}

MlpCache Mlp::make_decode_cache(int64_t rows) const {
  const int64_t n = rows * local_ffn_;
  return {.c_fc = {},
          .fc_pre = {backend_, c_fc_.local_out() * rows, kDecodeStep},
          .fc_act = {backend_, n, kDecodeStep},
          .c_proj = {}};
}

void Mlp::decode(float* out, const float* inp, MlpCache& c, int64_t rows) {
  c_fc_.decode(c.fc_pre.data(), inp, rows);
  activate(c.fc_act.data(), c.fc_pre.data(), rows);
  c_proj_.decode(out, c.fc_act.data(), rows);
}

void Mlp::backward_input(float* dinp, const float* dout, const MlpCache& c, MlpGrads& g,
                         bool column_weights) {
  float* dfc_act = scratch_.d_fc_act.data();
  c_proj_.backward_input(dfc_act, dout, c.c_proj, g.c_proj);
  const int64_t n = mb_.N * local_ffn_;
  const float* pre = c.fc_pre.data();
  if (swiglu_)
    backend_.swiglu_backward(g.dfc_pre.data(), g.dfc_pre.data() + n, dfc_act, pre, pre + n, n);
  else
    backend_.gelu_backward(g.dfc_pre.data(), dfc_act, pre, n);
  c_fc_.backward_input(dinp, g.dfc_pre.data(), c.c_fc, g.c_fc, column_weights);
}

void Mlp::backward_weight(const MlpCache& c, const MlpGrads& g, bool column_weights_done) {
  c_proj_.backward_weight(c.c_proj, g.c_proj);
  if (!column_weights_done) c_fc_.backward_weight(c.c_fc, g.c_fc);
}

}  // namespace gpt
