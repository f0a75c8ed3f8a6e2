// ColumnParallelLinear: forward and the two backward halves (see column_parallel_linear.h).
#include "layers/column_parallel_linear.h"

#include "framework/check.h"

namespace gpt {

namespace {

LinearShard column_shard(const LinearSpec& spec, const TensorParallel& tp, int64_t groups) {
  GPT_CHECK(spec.out_features % groups == 0,
            spec.name << ": groups do not divide the output features");
  const int64_t group_rows = spec.out_features / groups, IC = spec.in_features;
  const int64_t replicas = spec.tp_replicas;  // ranks r .. r + replicas - 1 hold the same rows
  GPT_CHECK(tp.size() % replicas == 0, spec.name << ": replicas do not divide tp");
  const ShardRange rows = shard_range(group_rows, static_cast<int>(tp.rank() / replicas),
                                      static_cast<int>(tp.size() / replicas));
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
  parts_.push_back({shard.local_out, 0, add_linear_parameters(ctx.store, spec, std::move(shard))});
  GPT_CHECK(!tp_.sequence_parallel() || scratch_.partial.size() >= mb_.N * in_,
            spec.name << ": the scratch for partial input gradients is too small");
}

ColumnParallelLinear::ColumnParallelLinear(const LayerContext& ctx,
                                           const std::vector<LinearSpec>& parts)
    : Layer(ctx), in_(parts.front().in_features) {
  for (const LinearSpec& spec : parts) {
    GPT_CHECK(spec.in_features == in_, spec.name << ": parts of one input differ in width");
    LinearShard shard = column_shard(spec, tp_, 1);
    const int64_t local_out = shard.local_out;
    parts_.push_back(
        {local_out, local_out_, add_linear_parameters(ctx.store, spec, std::move(shard))});
    local_out_ += local_out;
  }
  GPT_CHECK(!tp_.sequence_parallel() || scratch_.partial.size() >= mb_.N * in_,
            parts.front().name << ": the scratch for partial input gradients is too small");
}

ColumnParallelLinearCache ColumnParallelLinear::make_cache() const {
  return {.gathered = {backend_, mb_.gathered_rows(), kCache}};
}

void ColumnParallelLinear::run_forward(float* out, const float* inp, int64_t rows) {
  for (const Part& p : parts_)
    backend_.matmul_forward(out + rows * p.offset, inp, p.params.weight->operand(),
                            p.params.bias_value(), rows, in_, p.local_out);
}

void ColumnParallelLinear::forward(float* out, const float* inp, ColumnParallelLinearCache& c) {
  c.inp = inp;
  if (tp_.sequence_parallel()) {  // all-gather the input rows (backward: reduce-scatter)
    tp_.gather_rows(c.gathered.data(), inp, mb_.Nl, in_);
    c.inp = c.gathered.data();
  }
  run_forward(out, c.inp, mb_.N);
}

void ColumnParallelLinear::decode(float* out, const float* inp, int64_t rows) {
  for (const Part& p : parts_)
    backend_.matmul_forward_rows(out + rows * p.offset, inp, p.params.weight->value,
                                 p.params.bias_value(), rows, in_, p.local_out);
}

void ColumnParallelLinear::backward_input(float* dinp, const float* dout,
                                          const ColumnParallelLinearCache& cache,
                                          ColumnParallelLinearGrads& g, bool with_weight) {
  g.dout = dout;
  // Partial gradients of all rows (sequence parallel: into scratch, then reduce-scattered).
  float* target = tp_.sequence_parallel() ? scratch_.partial.data() : dinp;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Part& p = parts_[i];
    backend_.matmul_backward_input(target, dout + mb_.N * p.offset, p.params.weight->operand(),
                                   mb_.N, in_, p.local_out, i > 0);
  }
  // The weight gradient reads neither dinp nor the partial sums: it runs while they travel.
  std::function<void()> weight_half;
  if (with_weight) weight_half = [&] { backward_weight(cache, g); };
  tp_.reduce_input_grad(dinp, target, mb_.Nl, in_, weight_half);
}

void ColumnParallelLinear::backward_weight(const ColumnParallelLinearCache& c,
                                           const ColumnParallelLinearGrads& g) {
  for (const Part& p : parts_)
    backend_.matmul_backward_weight(p.params.weight->grad, p.params.bias_grad(),
                                    g.dout + mb_.N * p.offset, c.inp, mb_.N, in_, p.local_out);
}

}  // namespace gpt
