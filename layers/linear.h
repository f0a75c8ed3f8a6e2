// Linear layers in nn.Linear layout (weight (OC, IC), y = x W^T + b), split across tp the
// Megatron way. Column-parallel: the output features are split (each of `groups` equal groups
// separately, so c_attn's q, k and v rows each split by heads); the input gradient is partial and
// all-reduced (copy_to_tp_region). Row-parallel: the input features are split, the output is a
// partial sum all-reduced in the forward (reduce_from_tp_region) and the bias, replicated, is
// added after the reduction. Backward comes in two halves: input gradient and weight gradient.
// With sequence parallelism the all-reduces become row collectives: a column-parallel layer
// all-gathers its input rows (and reduce-scatters its input gradient), a row-parallel layer
// reduce-scatters its output rows (and all-gathers its output gradient). N is always the full
// row count B*T; `sp_buffer` (N, features) is the full-row tensor of that exchange.
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
  // Sequence parallel: column-parallel inp holds the local rows and sp_buffer (N, IC) receives
  // the gathered input (the weight half's `inp`); row-parallel out holds the local rows of the
  // reduced output and sp_buffer (N, OC) is scratch for the partial sums.
  void forward(float* out, const float* inp, int64_t N, float* sp_buffer = nullptr);
  // dinp (N, local_in) = dout . W; column-parallel: all-reduced over tp. Sequence parallel:
  // column-parallel dinp holds the local rows (reduce-scattered; sp_buffer (N, IC) scratch);
  // row-parallel dout holds the local rows and sp_buffer (N, OC) receives the gathered dout
  // (the weight half's `dout`).
  void backward_input(float* dinp, const float* dout, int64_t N, float* sp_buffer = nullptr);
  // dW += dout^T . inp, db += column sums of dout (both with all N rows).
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
