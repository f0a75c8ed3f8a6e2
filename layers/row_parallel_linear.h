// A linear layer in nn.Linear layout (y = x W^T + b) split over tp by input features, as
// Megatron's RowParallelLinear: rank r holds columns [r*IC/tp, (r+1)*IC/tp) of W, and its input
// is the matching block of features (a column-parallel layer's output). Each rank's product is a
// partial sum, all-reduced in the forward (reduce_from_tp_region); the bias, the same on every
// rank, is added after the reduction. The input gradient needs no communication. With sequence
// parallelism the reduction becomes a reduce-scatter to this rank's Nl output rows, and the
// output gradient, arriving as those rows, is all-gathered.
#pragma once

#include "framework/device_array.h"
#include "layers/layer.h"
#include "layers/linear_parameters.h"

namespace gpt {

struct RowParallelLinearCache {
  const float* inp = nullptr;  // (N,IC/tp) the input (the caller's buffer)
};

struct RowParallelLinearGrads {
  const float* dout = nullptr;  // (N,OC) the output gradient, all rows: the caller's, or `gathered`
  DeviceArray<float> gathered;  // (N,OC) the all-gathered output-gradient rows; sequence parallel
};

class RowParallelLinear : Layer {
 public:
  // IC must divide by tp.
  RowParallelLinear(const LayerContext& ctx, const LinearSpec& spec);
  RowParallelLinearCache make_cache() const { return {}; }
  RowParallelLinearGrads make_grads() const;

  // out (Nl,OC) = inp (N,IC/tp) . W^T summed over tp, + b.
  void forward(float* out, const float* inp, RowParallelLinearCache& cache);
  // Generation, one new row per sequence: out (B,OC) = inp (B,IC/tp) . W^T summed over tp, + b.
  // Generation: out (R,C) for R token rows, by the row-wise product, reduced over tp.
  void decode(float* out, const float* inp, int64_t rows);
  // dinp (N,IC/tp) = dout . W for dout (Nl,OC).
  void backward_input(float* dinp, const float* dout, const RowParallelLinearCache& cache,
                      RowParallelLinearGrads& grads);
  // dW += dout^T . inp, db += column sums of dout, over all N rows.
  void backward_weight(const RowParallelLinearCache& cache, const RowParallelLinearGrads& grads);

 private:
  int64_t local_in_, out_;
  LinearParameters params_;
};

}  // namespace gpt
