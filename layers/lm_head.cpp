// LM head with vocabulary-parallel cross-entropy (see lm_head.h).
#include "layers/lm_head.h"

namespace gpt {

LmHead::LmHead(ParameterStore& store, TensorParallel& tp, const ModelConfig& cfg, Parameter& wte)
    : backend_(store.backend()),
      tp_(tp),
      C_(cfg.d_model),
      T_(cfg.seq_len),
      shard_(vocab_shard(cfg, tp.rank(), tp.size())),
      ln_f_(store, "ln_f", cfg.d_model, tp.sequence_parallel(), tp.size()),
      wte_(wte),
      sp_(tp.sequence_parallel()) {}

HeadCache LmHead::make_cache(int64_t B) const {
  Backend& be = backend_;
  const int64_t N = B * T_;
  return HeadCache{{be, N * C_}, {be, N}, {be, N}, {be, N * shard_.count},
                   {be, N},      {be, N}, {be, N}, {be, N}};
}

HeadGrads LmHead::make_grads(int64_t B) const {
  return HeadGrads{{backend_, B * T_ * C_}};
}

void LmHead::forward(const float* inp, const int32_t* targets, HeadCache& c, float* ln_local,
                     int64_t B) {
  const int64_t N = B * T_, Nl = ln_f_.local_rows(N), V_local = shard_.count;
  ln_f_.forward(sp_ ? ln_local : c.lnf_out.data(), {c.lnf_mean.data(), c.lnf_rstd.data()}, inp, Nl);
  if (sp_) tp_.gather_rows(c.lnf_out.data(), ln_local, Nl, C_);  // the head sees every row
  backend_.matmul_forward(c.logits.data(), c.lnf_out.data(), wte_.value, nullptr, N, C_, V_local);
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

void LmHead::backward_input(float* dinp, const float* inp, const int32_t* targets, HeadCache& c,
                            HeadGrads& g, float loss_scale, float* partial, int64_t B) {
  const int64_t N = B * T_, Nl = ln_f_.local_rows(N), V_local = shard_.count;
  backend_.xent_backward(c.logits.data(), c.row_max.data(), c.row_sumexp.data(), targets, N,
                         V_local, shard_.valid, shard_.start, loss_scale);
  // ln_f's output gradient is partial over the vocabulary shards: summed over tp (and, with
  // sequence parallelism, scattered back to this rank's rows).
  if (sp_) {
    backend_.matmul_backward_input(partial, c.logits.data(), wte_.value, N, C_, V_local, false);
    tp_.reduce_scatter_rows(g.d_lnf_out.data(), partial, Nl, C_);
  } else {
    backend_.matmul_backward_input(g.d_lnf_out.data(), c.logits.data(), wte_.value, N, C_, V_local,
                                   false);
    tp_.copy_to_tp_region_backward(g.d_lnf_out.data(), N * C_);
  }
  backend_.fill_zero(dinp, Nl * C_);
  ln_f_.backward_input(dinp, g.d_lnf_out.data(), inp, {c.lnf_mean.data(), c.lnf_rstd.data()}, Nl);
}

void LmHead::backward_weight(const float* inp, HeadCache& c, HeadGrads& g, int64_t B) {
  const int64_t N = B * T_;
  backend_.matmul_backward_weight(wte_.grad, nullptr, c.logits.data(), c.lnf_out.data(), N, C_,
                                  shard_.count);
  ln_f_.backward_weight(g.d_lnf_out.data(), inp, {c.lnf_mean.data(), c.lnf_rstd.data()},
                        ln_f_.local_rows(N));
}

}  // namespace gpt
