// ColumnParallelLinear: forward and the two backward halves (see column_parallel_linear.h).
#include "layers/column_parallel_linear.h"

#include "framework/check.h"

namespace gpt {

namespace {

LinearShard column_shard(const LinearSpec& spec, const TensorParallel& tp, int64_t groups) {
  GPT_CHECK(spec.out_features % groups == 0,
            spec.name << ": groups do not divide the output features");
  const int64_t group_rows = spec.out_features / groups, IC = spec.in_features;
  const ShardRange rows = shard_range(group_rows, tp.rank(), tp.size());
  LinearShard shard{.local_in = IC, .local_out = rows.count * groups};
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first_row = g * group_rows + rows.start;
    shard.weight_slabs.push_back({{first_row, 0}, {rows.count, IC}, g * rows.count * IC});
    shard.bias_slabs.push_back({{first_row}, {rows.count}, g * rows.count});
  }
  return shard;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(const LayerContext& ctx, const LinearSpec& spec,
                                           int64_t groups)
    : Layer(ctx), in_(spec.in_features) {
  LinearShard shard = column_shard(spec, tp_, groups);
  local_out_ = shard.local_out;
  params_ = add_linear_parameters(ctx.store, spec, std::move(shard));
  GPT_CHECK(!tp_.sequence_parallel() || scratch_.partial.size() >= mb_.N * in_,
            spec.name << ": the scratch for partial input gradients is too small");
}

ColumnParallelLinearCache ColumnParallelLinear::make_cache() const {
  return {.gathered = {backend_, mb_.gathered_rows(), kCache}};
}

void ColumnParallelLinear::forward(float* out, const float* inp, ColumnParallelLinearCache& c) {
  c.inp = inp;
  if (tp_.sequence_parallel()) {  // all-gather the input rows (backward: reduce-scatter)
    tp_.gather_rows(c.gathered.data(), inp, mb_.Nl, in_);
    c.inp = c.gathered.data();
  }
  backend_.matmul_forward(out, c.inp, params_.weight->value, params_.bias->value, mb_.N, in_,
                          local_out_);
}

void ColumnParallelLinear::decode(float* out, const float* inp) {
  backend_.matmul_forward(out, inp, params_.weight->value, params_.bias->value, mb_.B, in_,
                          local_out_);
}

void ColumnParallelLinear::backward_input(float* dinp, const float* dout,
                                          const ColumnParallelLinearCache& /*cache*/,
                                          ColumnParallelLinearGrads& g) {
  g.dout = dout;
  const float* weight = params_.weight->value;
  if (tp_.sequence_parallel()) {  // partial gradients of all rows, reduce-scattered
    float* partial = scratch_.partial.data();
    backend_.matmul_backward_input(partial, dout, weight, mb_.N, in_, local_out_, false);
    tp_.reduce_scatter_rows(dinp, partial, mb_.Nl, in_);
  } else {
    backend_.matmul_backward_input(dinp, dout, weight, mb_.N, in_, local_out_, false);
    tp_.copy_to_tp_region_backward(dinp, mb_.N * in_);
  }
}

void ColumnParallelLinear::backward_weight(const ColumnParallelLinearCache& c,
                                           const ColumnParallelLinearGrads& g) {
  backend_.matmul_backward_weight(params_.weight->grad, params_.bias->grad, g.dout, c.inp, mb_.N,
                                  in_, local_out_);
}

}  // namespace gpt
