// MLP sublayer (see mlp.h).
#include "layers/mlp.h"

namespace gpt {

Mlp::Mlp(const LayerContext& ctx, const std::string& name, const ModelConfig& cfg)
    : Layer(ctx),
      c_fc_(ctx, {.name = name + ".c_fc",
                  .in_features = cfg.d_model,
                  .out_features = cfg.ffn_dim(),
                  .init_std = kLinearInitStd}),
      c_proj_(ctx, {.name = name + ".c_proj",
                    .in_features = cfg.ffn_dim(),
                    .out_features = cfg.d_model,
                    .init_std = residual_projection_init_std(cfg.n_layer)}) {}

MlpCache Mlp::make_cache() const {
  return {.c_fc = c_fc_.make_cache(),
          .fc_pre = {backend_, mb_.ffn(), kCache},
          .fc_act = {backend_, mb_.ffn(), kCache},
          .c_proj = c_proj_.make_cache()};
}

MlpGrads Mlp::make_grads() const {
  return {.c_proj = c_proj_.make_grads(),
          .dfc_pre = {backend_, mb_.ffn(), kCache},
          .c_fc = c_fc_.make_grads()};
}

void Mlp::forward(float* out, const float* inp, MlpCache& c) {
  c_fc_.forward(c.fc_pre.data(), inp, c.c_fc);
  backend_.gelu_forward(c.fc_act.data(), c.fc_pre.data(), c.fc_pre.size());
  c_proj_.forward(out, c.fc_act.data(), c.c_proj);
}

MlpCache Mlp::make_decode_cache() const {
  const int64_t n = mb_.B * c_fc_.local_out();
  return {.c_fc = {},
          .fc_pre = {backend_, n, kDecodeStep},
          .fc_act = {backend_, n, kDecodeStep},
          .c_proj = {}};
}

void Mlp::decode(float* out, const float* inp, MlpCache& c) {
  c_fc_.decode(c.fc_pre.data(), inp);
  backend_.gelu_forward(c.fc_act.data(), c.fc_pre.data(), c.fc_pre.size());
  c_proj_.decode(out, c.fc_act.data());
}

void Mlp::backward_input(float* dinp, const float* dout, const MlpCache& c, MlpGrads& g) {
  float* dfc_act = scratch_.d_fc_act.data();
  c_proj_.backward_input(dfc_act, dout, c.c_proj, g.c_proj);
  backend_.gelu_backward(g.dfc_pre.data(), dfc_act, c.fc_pre.data(), c.fc_pre.size());
  c_fc_.backward_input(dinp, g.dfc_pre.data(), c.c_fc, g.c_fc);
}

void Mlp::backward_weight(const MlpCache& c, const MlpGrads& g) {
  c_proj_.backward_weight(c.c_proj, g.c_proj);
  c_fc_.backward_weight(c.c_fc, g.c_fc);
}

}  // namespace gpt
