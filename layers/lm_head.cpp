// LM head with vocabulary-parallel cross-entropy (see lm_head.h).
#include "layers/lm_head.h"

namespace gpt {

LmHead::LmHead(const LayerContext& ctx, const ModelConfig& cfg, const NormSpec& final_norm,
               Parameter& wte)
    : Layer(ctx),
      C_(cfg.d_model),
      shard_(vocab_shard(cfg, tp_.rank(), tp_.size())),
      ln_f_(ctx, final_norm),
      wte_(wte),
      sp_(tp_.sequence_parallel()) {}

HeadCache LmHead::make_cache() const {
  Backend& be = backend_;
  return {.ln_f = ln_f_.make_cache(),
          .lnf_out = {be, mb_.head_rows(), kCache},
          .logits = {be, mb_.logits(), kCache},
          .row_max = {be, mb_.row_stat(), kCache},
          .row_sumexp = {be, mb_.row_stat(), kCache},
          .target_logit = {be, mb_.row_stat(), kCache},
          .losses = {be, mb_.row_stat(), kCache}};
}

HeadGrads LmHead::make_grads() const {
  return {.d_lnf_out = {backend_, mb_.residual(), kCache}, .ln_f = ln_f_.make_grads()};
}

void LmHead::forward(const float* inp, const int32_t* targets, HeadCache& c) {
  const int64_t N = mb_.N, V_local = shard_.count;
  c.targets = targets;
  ln_f_.forward(sp_ ? scratch_.ln_local.data() : c.lnf_out.data(), inp, c.ln_f);
  if (sp_) tp_.gather_rows(c.lnf_out.data(), scratch_.ln_local.data(), mb_.Nl, C_);  // all rows
  backend_.matmul_forward(c.logits.data(), c.lnf_out.data(), wte_.operand(), nullptr, N, C_,
                          V_local);
  // Vocabulary-parallel cross-entropy: three row statistics, each reduced over tp.
  backend_.xent_row_max(c.row_max.data(), c.logits.data(), N, V_local, shard_.valid);
  tp_.all_reduce(c.row_max.data(), N, ReduceOp::kMax);
  backend_.xent_row_sumexp(c.row_sumexp.data(), c.logits.data(), c.row_max.data(), N, V_local,
                           shard_.valid);
  tp_.all_reduce(c.row_sumexp.data(), N, ReduceOp::kSum);
  backend_.xent_target_logit(c.target_logit.data(), c.logits.data(), targets, N, V_local,
                             shard_.start);
  tp_.all_reduce(c.target_logit.data(), N, ReduceOp::kSum);
  backend_.xent_loss(c.losses.data(), c.row_max.data(), c.row_sumexp.data(), c.target_logit.data(),
                     N);
}

HeadCache LmHead::make_decode_cache(int64_t rows) const {
  // No loss: the statistics of the cross-entropy stay empty.
  return {.ln_f = ln_f_.make_decode_cache(rows),
          .lnf_out = {backend_, rows * C_, kDecodeStep},
          .targets = nullptr,
          .logits = {backend_, rows * shard_.count, kDecodeStep},
          .row_max = {},
          .row_sumexp = {},
          .target_logit = {},
          .losses = {}};
}

void LmHead::decode(const float* inp, HeadCache& c, int64_t rows) {
  ln_f_.decode(c.lnf_out.data(), inp, c.ln_f, rows);
  backend_.matmul_forward_rows(c.logits.data(), c.lnf_out.data(), wte_.value, nullptr, rows, C_,
                               shard_.count);
}

void LmHead::backward_input(float* dinp, float loss_scale, HeadCache& c, HeadGrads& g,
                            bool with_weight) {
  const int64_t N = mb_.N, V_local = shard_.count;
  backend_.xent_backward(c.logits.data(), c.row_max.data(), c.row_sumexp.data(), c.targets, N,
                         V_local, shard_.valid, shard_.start, loss_scale);
  // ln_f's output gradient is partial over the vocabulary shards: summed over tp (and, with
  // sequence parallelism, scattered back to this rank's rows), while the weight gradient, which
  // reads only the logits' gradient and ln_f's output, computes.
  float* partial = sp_ ? scratch_.partial.data() : g.d_lnf_out.data();
  backend_.matmul_backward_input(partial, c.logits.data(), wte_.operand(), N, C_, V_local, false);
  std::function<void()> weight_half;
  if (with_weight) weight_half = [&] { logits_weight_gradient(c); };
  tp_.reduce_input_grad(g.d_lnf_out.data(), partial, mb_.Nl, C_, weight_half);
  backend_.fill_zero(dinp, mb_.Nl * C_);
  ln_f_.backward_input(dinp, g.d_lnf_out.data(), c.ln_f, g.ln_f);
  store_residual(dinp, mb_.Nl * C_);
}

void LmHead::logits_weight_gradient(const HeadCache& c) {
  backend_.matmul_backward_weight(wte_.grad, nullptr, c.logits.data(), c.lnf_out.data(), mb_.N, C_,
                                  shard_.count);
}

void LmHead::backward_weight(const HeadCache& c, const HeadGrads& g, bool logits_weight_done) {
  if (!logits_weight_done) logits_weight_gradient(c);
  ln_f_.backward_weight(c.ln_f, g.ln_f);
}

}  // namespace gpt
