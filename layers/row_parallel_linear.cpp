// RowParallelLinear: forward and the two backward halves (see row_parallel_linear.h).
#include "layers/row_parallel_linear.h"

#include "framework/check.h"

namespace gpt {

RowParallelLinear::RowParallelLinear(const LayerContext& ctx, const LinearSpec& spec)
    : Layer(ctx), out_(spec.out_features) {
  LinearShard shard = row_shard(spec, tp_.rank(), tp_.size());
  local_in_ = shard.local_in;
  params_ = add_linear_parameters(ctx.store, spec, std::move(shard));
  GPT_CHECK(!tp_.sequence_parallel() || scratch_.partial.size() >= mb_.N * out_,
            spec.name << ": the scratch for partial outputs is too small");
}

RowParallelLinearGrads RowParallelLinear::make_grads() const {
  return {.gathered = {backend_, mb_.gathered_rows(), kCache}};
}

void RowParallelLinear::forward(float* out, const float* inp, RowParallelLinearCache& c) {
  c.inp = inp;
  const WeightOperand weight = params_.weight->operand();
  if (tp_.sequence_parallel()) {  // partial sums of all rows, reduce-scattered to this rank's rows
    float* partial = scratch_.partial.data();
    backend_.matmul_forward(partial, inp, weight, nullptr, mb_.N, local_in_, out_);
    tp_.reduce_scatter_rows(out, partial, mb_.Nl, out_);
  } else {
    backend_.matmul_forward(out, inp, weight, nullptr, mb_.N, local_in_, out_);
    tp_.reduce_from_tp_region(out, mb_.N * out_);
  }
  if (params_.bias) backend_.add_bias(out, params_.bias->value, mb_.Nl, out_);
}

void RowParallelLinear::decode(float* out, const float* inp, int64_t rows) {
  backend_.matmul_forward_rows(out, inp, params_.weight->value, nullptr, rows, local_in_, out_);
  tp_.reduce_decode_rows(out, rows * out_);
  if (params_.bias) backend_.add_bias(out, params_.bias->value, rows, out_);
}

void RowParallelLinear::backward_input(float* dinp, const float* dout,
                                       const RowParallelLinearCache& /*cache*/,
                                       RowParallelLinearGrads& g) {
  g.dout = dout;
  if (tp_.sequence_parallel()) {  // all-gather the output-gradient rows (forward: reduce-scatter)
    tp_.gather_rows(g.gathered.data(), dout, mb_.Nl, out_);
    g.dout = g.gathered.data();
  }
  backend_.matmul_backward_input(dinp, g.dout, params_.weight->operand(), mb_.N, local_in_, out_,
                                 false);
}

void RowParallelLinear::backward_weight(const RowParallelLinearCache& c,
                                        const RowParallelLinearGrads& g) {
  backend_.matmul_backward_weight(params_.weight->grad, params_.bias_grad(), g.dout, c.inp, mb_.N,
                                  local_in_, out_);
}

}  // namespace gpt
