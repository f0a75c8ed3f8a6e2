// Column- and row-parallel Linear (see linear.h).
#include "layers/linear.h"

#include "framework/check.h"

namespace gpt {

Linear::Linear(ParameterStore& store, TensorParallel& tp, const std::string& name,
               int64_t in_features, int64_t out_features, LinearSplit split, float init_std,
               int64_t groups)
    : backend_(store.backend()), tp_(tp), split_(split) {
  const int tp_size = tp.size(), tp_rank = tp.rank();
  ParameterSpec w{}, b{};
  w.name = name + ".weight";
  w.shape = {out_features, in_features};
  w.init = InitKind::kNormal;
  w.init_std = init_std;
  w.weight_decay = true;
  b.name = name + ".bias";
  b.shape = {out_features};
  b.init = InitKind::kZeros;
  if (split == LinearSplit::kColumn) {
    GPT_CHECK(out_features % groups == 0, name << ": groups do not divide the output features");
    const int64_t group_rows = out_features / groups;
    const ShardRange rows = shard_range(group_rows, tp_rank, tp_size);
    local_in_ = in_features;
    local_out_ = rows.count * groups;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first_row = g * group_rows + rows.start;
      w.slabs.push_back({{first_row, 0}, {rows.count, in_features}, g * rows.count * in_features});
      b.slabs.push_back({{first_row}, {rows.count}, g * rows.count});
    }
  } else {
    const ShardRange cols = shard_range(in_features, tp_rank, tp_size);
    local_in_ = cols.count;
    local_out_ = out_features;
    w.slabs.push_back({{0, cols.start}, {out_features, cols.count}, 0});
    b.slabs.push_back({{0}, {out_features}, 0});
    b.tp_replicated = true;  // added after the reduction: every tp rank holds the same bias
  }
  w.local_numel = local_out_ * local_in_;
  b.local_numel = local_out_;
  weight_ = &store.add(std::move(w));
  bias_ = &store.add(std::move(b));
}

void Linear::forward(float* out, const float* inp, int64_t N, float* sp_buffer) {
  const bool sp = tp_.sequence_parallel();
  const int64_t local_rows = tp_.local_rows(N);
  if (split_ == LinearSplit::kColumn) {
    if (sp) {  // all-gather the input rows (backward: reduce-scatter)
      tp_.gather_rows(sp_buffer, inp, local_rows, local_in_);
      inp = sp_buffer;
    }
    backend_.matmul_forward(out, inp, weight_->value, bias_->value, N, local_in_, local_out_);
    return;
  }
  if (sp) {  // partial sums of all rows, reduce-scattered to this rank's rows
    backend_.matmul_forward(sp_buffer, inp, weight_->value, nullptr, N, local_in_, local_out_);
    tp_.reduce_scatter_rows(out, sp_buffer, local_rows, local_out_);
  } else {
    backend_.matmul_forward(out, inp, weight_->value, nullptr, N, local_in_, local_out_);
    tp_.reduce_from_tp_region(out, N * local_out_);
  }
  backend_.add_bias(out, bias_->value, local_rows, local_out_);
}

void Linear::backward_input(float* dinp, const float* dout, int64_t N, float* sp_buffer) {
  const bool sp = tp_.sequence_parallel();
  const int64_t local_rows = tp_.local_rows(N);
  if (split_ == LinearSplit::kRow) {
    if (sp) {  // all-gather the output-gradient rows (forward: reduce-scatter)
      tp_.gather_rows(sp_buffer, dout, local_rows, local_out_);
      dout = sp_buffer;
    }
    backend_.matmul_backward_input(dinp, dout, weight_->value, N, local_in_, local_out_, false);
    return;
  }
  if (sp) {  // partial input gradients of all rows, reduce-scattered (forward: all-gather)
    backend_.matmul_backward_input(sp_buffer, dout, weight_->value, N, local_in_, local_out_,
                                   false);
    tp_.reduce_scatter_rows(dinp, sp_buffer, local_rows, local_in_);
  } else {
    backend_.matmul_backward_input(dinp, dout, weight_->value, N, local_in_, local_out_, false);
    tp_.copy_to_tp_region_backward(dinp, N * local_in_);
  }
}

void Linear::backward_weight(const float* dout, const float* inp, int64_t N) {
  backend_.matmul_backward_weight(weight_->grad, bias_->grad, dout, inp, N, local_in_, local_out_);
}

}  // namespace gpt
