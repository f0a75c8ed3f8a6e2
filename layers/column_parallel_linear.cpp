// ColumnParallelLinear: forward and the two backward halves (see column_parallel_linear.h).
#include "layers/column_parallel_linear.h"

#include "framework/check.h"

namespace gpt {

ColumnParallelLinear::ColumnParallelLinear(const LayerContext& ctx, const LinearSpec& spec)
    : ColumnParallelLinear(ctx, std::vector<LinearSpec>{spec}) {}

ColumnParallelLinear::ColumnParallelLinear(const LayerContext& ctx,
                                           const std::vector<LinearSpec>& parts)
    : Layer(ctx), in_(parts.front().in_features) {
  for (const LinearSpec& spec : parts) {
    GPT_CHECK(spec.in_features == in_, spec.name << ": parts of one input differ in width");
    LinearShard shard = column_shard(spec, tp_.rank(), tp_.size());
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
