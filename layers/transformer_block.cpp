// TransformerBlock: forward, input-gradient half and weight-gradient half (see the header).
#include "layers/transformer_block.h"

#include <string>

namespace gpt {

TransformerBlock::TransformerBlock(const LayerContext& ctx, const ModelConfig& cfg,
                                   const BlockParameters& p, const BlockDescription& d)
    : Layer(ctx),
      sp_(ctx.tp.sequence_parallel()),
      C_(cfg.d_model),
      ln_1_(ctx, p.attn_norm),
      attn_(ctx, cfg, p, d, ctx.scratch.rotary.data()),
      ln_2_(ctx, p.mlp_norm),
      mlp_(ctx, p, d) {}

BlockCache TransformerBlock::make_cache() const {
  Backend& be = backend_;
  return {.ln_1 = ln_1_.make_cache(),
          .ln1_out = {be, mb_.ln_out(), kCache},
          .attn = attn_.make_cache(),
          .res_mid = {be, mb_.residual(), kCache},
          .ln_2 = ln_2_.make_cache(),
          .ln2_out = {be, mb_.ln_out(), kCache},
          .mlp = mlp_.make_cache()};
}

BlockGrads TransformerBlock::make_grads() const {
  Backend& be = backend_;
  return {.mlp = mlp_.make_grads(),
          .d_ln2_out = {be, mb_.residual(), kCache},
          .ln_2 = ln_2_.make_grads(),
          .d_res_mid = {be, mb_.residual(), kCache},
          .attn = attn_.make_grads(),
          .d_ln1_out = {be, mb_.residual(), kCache},
          .ln_1 = ln_1_.make_grads()};
}

void TransformerBlock::forward(float* out, const float* inp, BlockCache& c) {
  // Without sequence parallelism a LayerNorm writes the linear's input into the cache; with it,
  // this rank's rows into scratch, and the linear keeps the gathered rows in its own cache.
  float* ln1 = sp_ ? scratch_.ln_local.data() : c.ln1_out.data();
  float* ln2 = sp_ ? scratch_.ln_local.data() : c.ln2_out.data();
  ln_1_.forward(ln1, inp, c.ln_1);
  attn_.forward(c.res_mid.data(), ln1, c.attn);
  backend_.accumulate(c.res_mid.data(), inp, mb_.Nl * C_);  // residual: x + attn
  store_residual(c.res_mid.data(), mb_.Nl * C_);
  ln_2_.forward(ln2, c.res_mid.data(), c.ln_2);
  mlp_.forward(out, ln2, c.mlp);
  backend_.accumulate(out, c.res_mid.data(), mb_.Nl * C_);  // residual: x1 + mlp
  store_residual(out, mb_.Nl * C_);
}

BlockCache TransformerBlock::make_decode_cache(int64_t rows, int64_t max_positions) const {
  Backend& be = backend_;
  const int64_t n = rows * C_;
  return {.ln_1 = ln_1_.make_decode_cache(rows),
          .ln1_out = {be, n, kDecodeStep},
          .attn = attn_.make_decode_cache(rows, max_positions),
          .res_mid = {be, n, kDecodeStep},
          .ln_2 = ln_2_.make_decode_cache(rows),
          .ln2_out = {be, n, kDecodeStep},
          .mlp = mlp_.make_decode_cache(rows)};
}

void TransformerBlock::decode(float* out, const float* inp, BlockCache& c, KvCache& kv,
                              const DecodeRows& rows) {
  const int64_t R = rows.count;
  ln_1_.decode(c.ln1_out.data(), inp, c.ln_1, R);
  attn_.decode(c.res_mid.data(), c.ln1_out.data(), c.attn, kv, rows);
  backend_.accumulate(c.res_mid.data(), inp, R * C_);  // residual: x + attn
  ln_2_.decode(c.ln2_out.data(), c.res_mid.data(), c.ln_2, R);
  mlp_.decode(out, c.ln2_out.data(), c.mlp, R);
  backend_.accumulate(out, c.res_mid.data(), R * C_);  // residual: x1 + mlp
}

void TransformerBlock::backward_input(float* dinp, const float* dout, const BlockCache& c,
                                      BlockGrads& g, bool column_weights) {
  const size_t residual_bytes = sizeof(float) * static_cast<size_t>(mb_.Nl * C_);
  // MLP branch: dout flows into the MLP and, unchanged, along the residual.
  mlp_.backward_input(g.d_ln2_out.data(), dout, c.mlp, g.mlp, column_weights);
  backend_.copy(g.d_res_mid.data(), dout, residual_bytes);
  ln_2_.backward_input(g.d_res_mid.data(), g.d_ln2_out.data(), c.ln_2, g.ln_2);
  store_residual(g.d_res_mid.data(), mb_.Nl * C_);
  // Attention branch, likewise.
  attn_.backward_input(g.d_ln1_out.data(), g.d_res_mid.data(), c.attn, g.attn, column_weights);
  backend_.copy(dinp, g.d_res_mid.data(), residual_bytes);
  ln_1_.backward_input(dinp, g.d_ln1_out.data(), c.ln_1, g.ln_1);
  store_residual(dinp, mb_.Nl * C_);
}

void TransformerBlock::backward_weight(const BlockCache& c, const BlockGrads& g,
                                       bool column_weights_done) {
  mlp_.backward_weight(c.mlp, g.mlp, column_weights_done);
  ln_2_.backward_weight(c.ln_2, g.ln_2);
  attn_.backward_weight(c.attn, g.attn, column_weights_done);
  ln_1_.backward_weight(c.ln_1, g.ln_1);
}

}  // namespace gpt
