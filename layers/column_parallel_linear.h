// A linear layer in nn.Linear layout (y = x W^T + b) split over tp by output features, as
// Megatron's ColumnParallelLinear: rank r holds rows [r*OC/tp, (r+1)*OC/tp) of each of `groups`
// equal groups of W's rows (c_attn's q, k and v each split by heads) and the same block of b.
// The input is replicated (copy_to_tp_region): the forward needs no communication, and the input
// gradient, partial on each rank, is all-reduced in the backward. With sequence parallelism the
// input arrives as this rank's Nl rows and is all-gathered, and its gradient is reduce-scattered.
#pragma once

#include "framework/device_array.h"
#include "layers/layer.h"
#include "layers/linear_parameters.h"

namespace gpt {

struct ColumnParallelLinearCache {
  const float* inp = nullptr;   // (N,IC) the input, all rows: the caller's buffer, or `gathered`
  DeviceArray<float> gathered;  // (N,IC) the all-gathered input rows; sequence parallel only
};

struct ColumnParallelLinearGrads {
  const float* dout = nullptr;  // (N,OC/tp) the output gradient (the caller's buffer)
};

class ColumnParallelLinear : Layer {
 public:
  // OC / groups must divide by tp.
  ColumnParallelLinear(const LayerContext& ctx, const LinearSpec& spec, int64_t groups = 1);
  int64_t local_out() const { return local_out_; }  // OC/tp
  ColumnParallelLinearCache make_cache() const;
  ColumnParallelLinearGrads make_grads() const { return {}; }

  // out (N,OC/tp) = inp . W^T + b for inp (Nl,IC).
  void forward(float* out, const float* inp, ColumnParallelLinearCache& cache);
  // Generation, one new row per sequence: out (B,OC/tp) = inp (B,IC) . W^T + b (no communication).
  void decode(float* out, const float* inp);
  // dinp (Nl,IC) = dout (N,OC/tp) . W, summed over tp (with sequence parallelism: this rank's
  // rows of the sum).
  void backward_input(float* dinp, const float* dout, const ColumnParallelLinearCache& cache,
                      ColumnParallelLinearGrads& grads);
  // dW += dout^T . inp, db += column sums of dout, over all N rows.
  void backward_weight(const ColumnParallelLinearCache& cache,
                       const ColumnParallelLinearGrads& grads);

 private:
  int64_t in_, local_out_;
  LinearParameters params_;
};

}  // namespace gpt
