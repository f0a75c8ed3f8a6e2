// TransformerBlock: forward, input-gradient half and weight-gradient half (see the header).
#include "layers/transformer_block.h"

namespace gpt {

TransformerBlock::TransformerBlock(ParameterStore& store, TensorParallel& tp, int64_t layer,
                                   const ModelConfig& cfg)
    : backend_(store.backend()),
      sp_(tp.sequence_parallel()),
      C_(cfg.d_model),
      T_(cfg.seq_len),
      ln_1_(store, "h." + std::to_string(layer) + ".ln_1", cfg.d_model, sp_, tp.size()),
      attn_(store, tp, "h." + std::to_string(layer) + ".attn", cfg),
      ln_2_(store, "h." + std::to_string(layer) + ".ln_2", cfg.d_model, sp_, tp.size()),
      mlp_(store, tp, "h." + std::to_string(layer) + ".mlp", cfg) {}

BlockCache TransformerBlock::make_cache(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_, Nl = ln_1_.local_rows(N), Cl = attn_.local_channels();
  const int64_t Fl = mlp_.local_ffn();
  return BlockCache{{be, Nl},
                    {be, Nl},
                    {be, N * C_},
                    {be, N * 3 * Cl},
                    {be, be.attention_cache_floats(B, attn_.local_heads(), T_)},
                    {be, N * Cl},
                    {be, Nl * C_},
                    {be, Nl},
                    {be, Nl},
                    {be, N * C_},
                    {be, N * Fl},
                    {be, N * Fl}};
}

BlockGrads TransformerBlock::make_grads(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_, Nl = ln_1_.local_rows(N), full = sp_ ? N * C_ : 0;
  return BlockGrads{{be, Nl * C_},
                    {be, Nl * C_},
                    {be, Nl * C_},
                    {be, Nl * C_},
                    {be, N * 3 * attn_.local_channels()},
                    {be, N * mlp_.local_ffn()},
                    {be, full},
                    {be, full}};
}

BlockScratch TransformerBlock::make_scratch(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_, Nl = ln_1_.local_rows(N);
  return BlockScratch{{be, N * attn_.local_channels()},
                      {be, be.attention_scratch_floats(B, attn_.local_heads(), T_)},
                      {be, N * mlp_.local_ffn()},
                      {be, N * C_},
                      {be, sp_ ? Nl * C_ : 0}};
}

void TransformerBlock::forward(float* out, const float* inp, BlockCache& c, BlockScratch& s,
                               int64_t B) {
  const int64_t N = B * T_, Nl = ln_1_.local_rows(N);
  // Without sequence parallelism the LayerNorm writes the linear's input directly; with it the
  // LayerNorm writes this rank's rows and the linear gathers them into the cache.
  float* ln1 = sp_ ? s.ln_local.data() : c.ln1_out.data();
  float* ln2 = sp_ ? s.ln_local.data() : c.ln2_out.data();
  float* gathered1 = sp_ ? c.ln1_out.data() : nullptr;
  float* gathered2 = sp_ ? c.ln2_out.data() : nullptr;
  ln_1_.forward(ln1, {c.ln1_mean.data(), c.ln1_rstd.data()}, inp, Nl);
  attn_.forward(c.res_mid.data(), ln1, gathered1, s.partial.data(),
                {c.qkv.data(), c.att.data(), c.atty.data()}, B, T_);
  backend_.accumulate(c.res_mid.data(), inp, Nl * C_);  // residual: x + attn
  ln_2_.forward(ln2, {c.ln2_mean.data(), c.ln2_rstd.data()}, c.res_mid.data(), Nl);
  mlp_.forward(out, ln2, gathered2, s.partial.data(), {c.fc_pre.data(), c.fc_act.data()}, N);
  backend_.accumulate(out, c.res_mid.data(), Nl * C_);  // residual: x1 + mlp
}

void TransformerBlock::backward_input(float* dinp, const float* inp, BlockCache& c, BlockGrads& g,
                                      BlockScratch& s, int64_t B) {
  const int64_t N = B * T_, Nl = ln_1_.local_rows(N);
  // MLP branch: d_out flows into the MLP and, unchanged, along the residual.
  mlp_.backward_input(g.d_ln2_out.data(), g.d_fc_pre.data(), s.d_fc_act.data(), g.d_out.data(),
                      g.d_out_full.data(), s.partial.data(), {c.fc_pre.data(), c.fc_act.data()}, N);
  backend_.copy(g.d_res_mid.data(), g.d_out.data(), sizeof(float) * Nl * C_);
  ln_2_.backward_input(g.d_res_mid.data(), g.d_ln2_out.data(), c.res_mid.data(),
                       {c.ln2_mean.data(), c.ln2_rstd.data()}, Nl);
  // Attention branch, likewise.
  attn_.backward_input(g.d_ln1_out.data(), g.d_qkv.data(), s.d_atty.data(), s.d_att.data(),
                       g.d_res_mid.data(), g.d_res_mid_full.data(), s.partial.data(),
                       {c.qkv.data(), c.att.data(), c.atty.data()}, B, T_);
  backend_.copy(dinp, g.d_res_mid.data(), sizeof(float) * Nl * C_);
  ln_1_.backward_input(dinp, g.d_ln1_out.data(), inp, {c.ln1_mean.data(), c.ln1_rstd.data()}, Nl);
}

void TransformerBlock::backward_weight(const float* inp, BlockCache& c, BlockGrads& g, int64_t B) {
  const int64_t N = B * T_, Nl = ln_1_.local_rows(N);
  // The row-parallel weights need their output gradient for all rows: gathered in the input
  // half when sequence parallel.
  const float* mlp_dout = sp_ ? g.d_out_full.data() : g.d_out.data();
  const float* attn_dout = sp_ ? g.d_res_mid_full.data() : g.d_res_mid.data();
  mlp_.backward_weight(mlp_dout, g.d_fc_pre.data(), c.ln2_out.data(),
                       {c.fc_pre.data(), c.fc_act.data()}, N);
  ln_2_.backward_weight(g.d_ln2_out.data(), c.res_mid.data(),
                        {c.ln2_mean.data(), c.ln2_rstd.data()}, Nl);
  attn_.backward_weight(attn_dout, g.d_qkv.data(), c.ln1_out.data(),
                        {c.qkv.data(), c.att.data(), c.atty.data()}, N);
  ln_1_.backward_weight(g.d_ln1_out.data(), inp, {c.ln1_mean.data(), c.ln1_rstd.data()}, Nl);
}

}  // namespace gpt
