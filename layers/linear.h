// Linear layers in nn.Linear layout (weight (OC, IC), y = x W^T + b), split across tp the
// Megatron way. Column-parallel: the output features are split (each of `groups` equal groups
// separately, so c_attn's q, k and v rows each split by heads); the input gradient is partial and
// all-reduced (copy_to_tp_region). Row-parallel: the input features are split, the output is a
// partial sum all-reduced in the forward (reduce_from_tp_region) and the bias, replicated, is
// added after the reduction. Backward comes in two halves: input gradient and weight gradient.
#pragma once

#include <string>

#include "framework/backend.h"
#include "framework/parameter.h"
#include "parallel/tensor_parallel.h"

namespace gpt {

enum class LinearSplit { kColumn, kRow };

class Linear {
 public:
  // Registers "<name>.weight" [OC, IC] and "<name>.bias" [OC] with N(0, init_std) weights and
  // zero biases. OC (column, per group) or IC (row) must divide by tp.
  Linear(ParameterStore& store, TensorParallel& tp, const std::string& name, int64_t in_features,
         int64_t out_features, LinearSplit split, float init_std, int64_t groups = 1);

  int64_t local_in() const { return local_in_; }
  int64_t local_out() const { return local_out_; }

  // out (N, local_out) = inp (N, local_in) . W^T + b. Row-parallel: reduced over tp, bias after.
  void forward(float* out, const float* inp, int64_t N);
  // dinp (N, local_in) = dout . W; column-parallel: all-reduced over tp. accumulate adds instead.
  void backward_input(float* dinp, const float* dout, int64_t N, bool accumulate = false);
  // dW += dout^T . inp, db += column sums of dout.
  void backward_weight(const float* dout, const float* inp, int64_t N);

 private:
  Backend& backend_;
  TensorParallel& tp_;
  LinearSplit split_;
  int64_t local_in_, local_out_;
  Parameter* weight_;
  Parameter* bias_;
};

}  // namespace gpt
