// Attention sublayer (see attention.h).
#include "layers/attention.h"

#include "framework/check.h"

namespace gpt {

Attention::Attention(const LayerContext& ctx, const ModelConfig& cfg, const BlockParameters& p,
                     const BlockDescription& d, const float* rotary)
    : Layer(ctx),
      fused_(d.fused_qkv),
      local_heads_(cfg.n_head / ctx.tp.size()),
      local_kv_heads_(cfg.kv_heads_per_rank(ctx.tp.size())),
      head_dim_(cfg.head_dim()),
      rotary_(rotary),
      c_attn_(ctx, p.qkv),
      c_proj_(ctx, p.attn_out) {
  GPT_CHECK(cfg.n_head % tp_.size() == 0 &&
                (cfg.kv_heads() % tp_.size() == 0 || tp_.size() % cfg.kv_heads() == 0),
            "tp does not divide the heads");
  // The combinations this layer runs: a fused c_attn with learned positions (GPT-2), or q, k
  // and v apart with rotary positions and optional q/k norms (the Llama family).
  GPT_CHECK(fused_ ? (!d.rotary() && p.qk_norms.empty() && p.qkv.size() == 1)
                   : (d.rotary() && p.qkv.size() == 3),
            "an attention of this block description is not implemented");
  GPT_CHECK(fused_ || rotary_ != nullptr, "rotary positions need the rotary table");
  if (!p.qk_norms.empty()) {
    q_norm_ = std::make_unique<LayerNorm>(ctx, p.qk_norms.at(0));
    k_norm_ = std::make_unique<LayerNorm>(ctx, p.qk_norms.at(1));
  }
}

AttentionShape Attention::shape(int64_t T) const {
  if (fused_) return fused_qkv_shape(mb_.B, T, local_heads_, head_dim_);
  return {mb_.B,
          T,
          local_heads_,
          local_kv_heads_,
          head_dim_,
          local_heads_ * head_dim_,
          local_kv_heads_ * head_dim_};
}

AttentionCache Attention::make_cache() const {
  Backend& be = backend_;
  return {.c_attn = c_attn_.make_cache(),
          .qkv = {be, mb_.qkv(), kCache},
          .qk_pre = {be, mb_.qk_pre(), kCache},
          .q_norm = q_norm_ ? q_norm_->make_cache() : LayerNormCache{},
          .k_norm = k_norm_ ? k_norm_->make_cache() : LayerNormCache{},
          .att = {be, mb_.attention_cache(), kCache},
          .atty = {be, mb_.attention_out(), kCache},
          .c_proj = c_proj_.make_cache()};
}

AttentionGrads Attention::make_grads() const {
  return {.c_proj = c_proj_.make_grads(),
          .dqkv = {backend_, mb_.qkv(), kCache},
          .dqk_normed = {backend_, mb_.qk_pre(), kCache},
          .q_norm = {},
          .k_norm = {},
          .c_attn = c_attn_.make_grads()};
}

AttentionShape Attention::decode_shape(int64_t rows, int64_t block_tokens) const {
  AttentionShape s = shape(block_tokens);
  s.B = rows;
  return s;
}

void Attention::prepare_qk(float* qkv, AttentionCache& c) {
  if (fused_) return;
  const auto x = split(qkv, mb_.N);
  if (q_norm_) {  // the norms read their inputs from the cache, and write q and k back
    backend_.copy(c.qk_pre.data(), qkv, sizeof(float) * static_cast<size_t>(c.qk_pre.size()));
    q_norm_->forward(x.q, c.qk_pre.data(), c.q_norm);
    k_norm_->forward(x.k, c.qk_pre.data() + mb_.N * local_heads_ * head_dim_, c.k_norm);
  }
  backend_.rotary_forward(x.q, rotary_, mb_.B, mb_.T, local_heads_, head_dim_, 0);
  backend_.rotary_forward(x.k, rotary_, mb_.B, mb_.T, local_kv_heads_, head_dim_, 0);
}

void Attention::prepare_decode_qk(float* qkv, AttentionCache& c, const DecodeRows& rows) {
  if (fused_) return;
  const int64_t R = rows.count, q = local_heads_ * head_dim_, kv = local_kv_heads_ * head_dim_;
  const auto x = split(qkv, R);
  if (q_norm_) {
    backend_.copy(c.qk_pre.data(), qkv, sizeof(float) * static_cast<size_t>(R * (q + kv)));
    q_norm_->decode(x.q, c.qk_pre.data(), c.q_norm, R);
    k_norm_->decode(x.k, c.qk_pre.data() + R * q, c.k_norm, R);
  }
  // Each row turns by its own position's angles: one sequence of one token at a time.
  for (int64_t r = 0; r < R; ++r) {
    backend_.rotary_forward(x.q + r * q, rotary_, 1, 1, local_heads_, head_dim_, rows.positions[r]);
    backend_.rotary_forward(x.k + r * kv, rotary_, 1, 1, local_kv_heads_, head_dim_,
                            rows.positions[r]);
  }
}

void Attention::forward(float* out, const float* inp, AttentionCache& c) {
  c_attn_.forward(c.qkv.data(), inp, c.c_attn);
  prepare_qk(c.qkv.data(), c);
  // Selective recomputation keeps no attention cache: the forward's goes to scratch.
  float* att = mb_.drop_attention_cache ? scratch_.att_rebuilt.data() : c.att.data();
  const auto x = split(c.qkv.data(), mb_.N);
  backend_.attention_forward(c.atty.data(), att, x.q, x.k, x.v, shape(mb_.T));
  c_proj_.forward(out, c.atty.data(), c.c_proj);
}

AttentionCache Attention::make_decode_cache(int64_t rows, int64_t max_positions) const {
  const int64_t q = local_heads_ * head_dim_, kv = local_kv_heads_ * head_dim_;
  return {.c_attn = {},
          .qkv = {backend_, rows * (q + 2 * kv), kDecodeStep},
          .qk_pre = {backend_, q_norm_ ? rows * (q + kv) : 0, kDecodeStep},
          .q_norm = q_norm_ ? q_norm_->make_decode_cache(rows) : LayerNormCache{},
          .k_norm = k_norm_ ? k_norm_->make_decode_cache(rows) : LayerNormCache{},
          // No backward reads it: decode's attention scores, written and read within the step.
          .att = {backend_, backend_.paged_attention_floats(rows, local_heads_, max_positions),
                  kDecodeStep},
          .atty = {backend_, rows * q, kDecodeStep},
          .c_proj = {}};
}

KvCache Attention::make_kv_cache(int64_t blocks, int64_t block_tokens) const {
  const int64_t n = blocks * local_kv_heads_ * block_tokens * head_dim_;
  return {.k = {backend_, n, kKvCache}, .v = {backend_, n, kKvCache}};
}

void Attention::decode(float* out, const float* inp, AttentionCache& c, KvCache& kv,
                       const DecodeRows& rows) {
  const int64_t R = rows.count;
  c_attn_.decode(c.qkv.data(), inp, R);
  prepare_decode_qk(c.qkv.data(), c, rows);
  const auto x = split(c.qkv.data(), R);
  const AttentionShape s = decode_shape(R, rows.block_tokens);
  backend_.paged_kv_store(kv.k.data(), kv.v.data(), x.k, x.v, s, rows.slots);
  backend_.paged_attention_decode(c.atty.data(), c.att.data(), x.q, kv.k.data(), kv.v.data(), s,
                                  rows.block_tables, rows.max_blocks, rows.lengths);
  c_proj_.decode(out, c.atty.data(), R);
}

void Attention::backward_input(float* dinp, const float* dout, const AttentionCache& c,
                               AttentionGrads& g, bool column_weights) {
  float* datty = scratch_.d_atty.data();
  const float* att = c.att.data();
  const auto x = split(c.qkv.data(), mb_.N);
  if (mb_.drop_attention_cache) {
    // Selective recomputation: the same forward on the kept q, k, v rebuilds the same cache, bit
    // for bit. Its output lands in datty, which c_proj's input gradient then overwrites.
    backend_.attention_forward(datty, scratch_.att_rebuilt.data(), x.q, x.k, x.v, shape(mb_.T));
    att = scratch_.att_rebuilt.data();
  }
  c_proj_.backward_input(datty, dout, c.c_proj, g.c_proj);
  const auto dx = split(g.dqkv.data(), mb_.N);
  backend_.attention_backward(dx.q, dx.k, dx.v, scratch_.d_att.data(), datty, c.atty.data(), x.q,
                              x.k, x.v, att, shape(mb_.T));
  if (!fused_) {
    backend_.rotary_backward(dx.q, rotary_, mb_.B, mb_.T, local_heads_, head_dim_, 0);
    backend_.rotary_backward(dx.k, rotary_, mb_.B, mb_.T, local_kv_heads_, head_dim_, 0);
  }
  if (q_norm_) {  // the norms' output gradients are kept for their weight halves
    const int64_t qk = g.dqk_normed.size(), q = mb_.N * local_heads_ * head_dim_;
    backend_.copy(g.dqk_normed.data(), dx.q, sizeof(float) * static_cast<size_t>(qk));
    backend_.fill_zero(dx.q, qk);
    q_norm_->backward_input(dx.q, g.dqk_normed.data(), c.q_norm, g.q_norm);
    k_norm_->backward_input(dx.k, g.dqk_normed.data() + q, c.k_norm, g.k_norm);
  }
  c_attn_.backward_input(dinp, g.dqkv.data(), c.c_attn, g.c_attn, column_weights);
}

void Attention::backward_weight(const AttentionCache& c, const AttentionGrads& g,
                                bool column_weights_done) {
  c_proj_.backward_weight(c.c_proj, g.c_proj);
  if (q_norm_) {
    q_norm_->backward_weight(c.q_norm, g.q_norm);
    k_norm_->backward_weight(c.k_norm, g.k_norm);
  }
  if (!column_weights_done) c_attn_.backward_weight(c.c_attn, g.c_attn);
}

}  // namespace gpt
