// Attention sublayer (see attention.h).
#include "layers/attention.h"

#include "framework/check.h"

namespace gpt {

Attention::Attention(const LayerContext& ctx, const std::string& name, const ModelConfig& cfg)
    : Layer(ctx),
      local_heads_(cfg.n_head / ctx.tp.size()),
      head_dim_(cfg.head_dim()),
      c_attn_(ctx,
              {.name = name + ".c_attn",
               .in_features = cfg.d_model,
               .out_features = 3 * cfg.d_model,
               .init_std = kLinearInitStd},
              3),
      c_proj_(ctx, {.name = name + ".c_proj",
                    .in_features = cfg.d_model,
                    .out_features = cfg.d_model,
                    .init_std = residual_projection_init_std(cfg.n_layer)}) {
  GPT_CHECK(cfg.n_head % tp_.size() == 0, "tp does not divide the heads");
}

AttentionCache Attention::make_cache() const {
  Backend& be = backend_;
  return {.c_attn = c_attn_.make_cache(),
          .qkv = {be, mb_.qkv(), kCache},
          .att = {be, mb_.attention_cache(), kCache},
          .atty = {be, mb_.attention_out(), kCache},
          .c_proj = c_proj_.make_cache()};
}

AttentionGrads Attention::make_grads() const {
  return {.c_proj = c_proj_.make_grads(),
          .dqkv = {backend_, mb_.qkv(), kCache},
          .c_attn = c_attn_.make_grads()};
}

void Attention::forward(float* out, const float* inp, AttentionCache& c) {
  c_attn_.forward(c.qkv.data(), inp, c.c_attn);
  // Selective recomputation keeps no attention cache: the forward's goes to scratch.
  float* att = mb_.drop_attention_cache ? scratch_.att_rebuilt.data() : c.att.data();
  backend_.attention_forward(c.atty.data(), att, c.qkv.data(), mb_.B, mb_.T, local_heads_,
                             head_dim_);
  c_proj_.forward(out, c.atty.data(), c.c_proj);
}

AttentionCache Attention::make_decode_cache() const {
  const int64_t local_channels = local_heads_ * head_dim_;
  return {
      .c_attn = {},
      .qkv = {backend_, mb_.B * 3 * local_channels, kDecodeStep},
      // No backward reads it: decode's attention scores, written and read within the step.
      .att = {backend_, backend_.attention_decode_floats(mb_.B, local_heads_, mb_.T), kDecodeStep},
      .atty = {backend_, mb_.B * local_channels, kDecodeStep},
      .c_proj = {}};
}

KvCache Attention::make_kv_cache() const {
  const int64_t n = mb_.B * local_heads_ * mb_.T * head_dim_;
  return {.k = {backend_, n, kKvCache}, .v = {backend_, n, kKvCache}};
}

void Attention::store_keys_values(KvCache& kv, const AttentionCache& c) {
  backend_.attention_kv_store(kv.k.data(), kv.v.data(), c.qkv.data(), mb_.B, mb_.T, local_heads_,
                              head_dim_, mb_.T, 0);
}

void Attention::decode(float* out, const float* inp, AttentionCache& c, KvCache& kv, int64_t pos) {
  GPT_CHECK(pos >= 0 && pos < mb_.T, "decode at position " << pos << " of " << mb_.T);
  c_attn_.decode(c.qkv.data(), inp);
  backend_.attention_kv_store(kv.k.data(), kv.v.data(), c.qkv.data(), mb_.B, 1, local_heads_,
                              head_dim_, mb_.T, pos);
  backend_.attention_decode(c.atty.data(), c.att.data(), c.qkv.data(), kv.k.data(), kv.v.data(),
                            mb_.B, local_heads_, head_dim_, mb_.T, pos + 1);
  c_proj_.decode(out, c.atty.data());
}

void Attention::backward_input(float* dinp, const float* dout, const AttentionCache& c,
                               AttentionGrads& g) {
  float* datty = scratch_.d_atty.data();
  const float* att = c.att.data();
  if (mb_.drop_attention_cache) {
    // Selective recomputation: the same forward on the kept q, k, v rebuilds the same cache, bit
    // for bit. Its output lands in datty, which c_proj's input gradient then overwrites.
    backend_.attention_forward(datty, scratch_.att_rebuilt.data(), c.qkv.data(), mb_.B, mb_.T,
                               local_heads_, head_dim_);
    att = scratch_.att_rebuilt.data();
  }
  c_proj_.backward_input(datty, dout, c.c_proj, g.c_proj);
  backend_.attention_backward(g.dqkv.data(), scratch_.d_att.data(), datty, c.atty.data(),
                              c.qkv.data(), att, mb_.B, mb_.T, local_heads_, head_dim_);
  c_attn_.backward_input(dinp, g.dqkv.data(), c.c_attn, g.c_attn);
}

void Attention::backward_weight(const AttentionCache& c, const AttentionGrads& g) {
  c_proj_.backward_weight(c.c_proj, g.c_proj);
  c_attn_.backward_weight(c.c_attn, g.c_attn);
}

}  // namespace gpt
