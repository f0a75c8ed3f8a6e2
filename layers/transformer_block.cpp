// TransformerBlock: forward, input-gradient half and weight-gradient half (see the header).
#include "layers/transformer_block.h"

namespace gpt {

TransformerBlock::TransformerBlock(ParameterStore& store, TensorParallel& tp, int64_t layer,
                                   const ModelConfig& cfg)
    : backend_(store.backend()),
      C_(cfg.d_model),
      T_(cfg.seq_len),
      ln_1_(store, "h." + std::to_string(layer) + ".ln_1", cfg.d_model),
      attn_(store, tp, "h." + std::to_string(layer) + ".attn", cfg),
      ln_2_(store, "h." + std::to_string(layer) + ".ln_2", cfg.d_model),
      mlp_(store, tp, "h." + std::to_string(layer) + ".mlp", cfg) {}

BlockCache TransformerBlock::make_cache(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_, Cl = attn_.local_channels(), Fl = mlp_.local_ffn();
  return BlockCache{{be, N * C_},
                    {be, N},
                    {be, N},
                    {be, N * 3 * Cl},
                    {be, B * attn_.local_heads() * T_ * T_},
                    {be, N * Cl},
                    {be, N * C_},
                    {be, N * C_},
                    {be, N},
                    {be, N},
                    {be, N * Fl},
                    {be, N * Fl}};
}

BlockGrads TransformerBlock::make_grads(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_;
  return BlockGrads{{be, N * C_},
                    {be, N * C_},
                    {be, N * C_},
                    {be, N * C_},
                    {be, N * 3 * attn_.local_channels()},
                    {be, N * mlp_.local_ffn()}};
}

BlockScratch TransformerBlock::make_scratch(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_;
  return BlockScratch{{be, N * attn_.local_channels()},
                      {be, B * attn_.local_heads() * T_ * T_},
                      {be, N * mlp_.local_ffn()}};
}

void TransformerBlock::forward(float* out, const float* inp, BlockCache& c, int64_t B) {
  const int64_t N = B * T_;
  ln_1_.forward(c.ln1_out.data(), {c.ln1_mean.data(), c.ln1_rstd.data()}, inp, N);
  attn_.forward(c.res_mid.data(), c.ln1_out.data(), {c.qkv.data(), c.att.data(), c.atty.data()}, B,
                T_);
  backend_.accumulate(c.res_mid.data(), inp, N * C_);  // residual: x + attn
  ln_2_.forward(c.ln2_out.data(), {c.ln2_mean.data(), c.ln2_rstd.data()}, c.res_mid.data(), N);
  mlp_.forward(out, c.ln2_out.data(), {c.fc_pre.data(), c.fc_act.data()}, N);
  backend_.accumulate(out, c.res_mid.data(), N * C_);  // residual: x1 + mlp
}

void TransformerBlock::backward_input(float* dinp, const float* inp, BlockCache& c, BlockGrads& g,
                                      BlockScratch& s, int64_t B) {
  const int64_t N = B * T_;
  // MLP branch: d_out flows into the MLP and, unchanged, along the residual.
  mlp_.backward_input(g.d_ln2_out.data(), g.d_fc_pre.data(), s.d_fc_act.data(), g.d_out.data(),
                      {c.fc_pre.data(), c.fc_act.data()}, N);
  backend_.copy(g.d_res_mid.data(), g.d_out.data(), sizeof(float) * N * C_);
  ln_2_.backward_input(g.d_res_mid.data(), g.d_ln2_out.data(), c.res_mid.data(),
                       {c.ln2_mean.data(), c.ln2_rstd.data()}, N);
  // Attention branch, likewise.
  attn_.backward_input(g.d_ln1_out.data(), g.d_qkv.data(), s.d_atty.data(), s.d_att.data(),
                       g.d_res_mid.data(), {c.qkv.data(), c.att.data(), c.atty.data()}, B, T_);
  backend_.copy(dinp, g.d_res_mid.data(), sizeof(float) * N * C_);
  ln_1_.backward_input(dinp, g.d_ln1_out.data(), inp, {c.ln1_mean.data(), c.ln1_rstd.data()}, N);
}

void TransformerBlock::backward_weight(const float* inp, BlockCache& c, BlockGrads& g, int64_t B) {
  const int64_t N = B * T_;
  mlp_.backward_weight(g.d_out.data(), g.d_fc_pre.data(), c.ln2_out.data(),
                       {c.fc_pre.data(), c.fc_act.data()}, N);
  ln_2_.backward_weight(g.d_ln2_out.data(), c.res_mid.data(),
                        {c.ln2_mean.data(), c.ln2_rstd.data()}, N);
  attn_.backward_weight(g.d_res_mid.data(), g.d_qkv.data(), c.ln1_out.data(),
                        {c.qkv.data(), c.att.data(), c.atty.data()}, N);
  ln_1_.backward_weight(g.d_ln1_out.data(), inp, {c.ln1_mean.data(), c.ln1_rstd.data()}, N);
}

}  // namespace gpt
