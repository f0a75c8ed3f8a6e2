// A linear layer in nn.Linear layout (y = x W^T + b) split over tp by output features, as
// Megatron's ColumnParallelLinear: rank r holds rows [r*OC/tp, (r+1)*OC/tp) of each of `groups`
// equal groups of W's rows (c_attn's q, k and v each split by heads) and the same block of b.
// Several linears that read one input (Llama's q, k and v projections; its gate and up) form one
// layer of `parts`, each its own parameters: their outputs lie part after part, (N, OC_p/tp)
// each, and their input gradients are summed. The input is replicated (copy_to_tp_region): the
// forward needs no communication, and the input gradient, partial on each rank, is all-reduced
// in the backward. With sequence parallelism the input arrives as this rank's Nl rows and is
// all-gathered once for every part, and its gradient is reduce-scattered.
#pragma once

#include <functional>
#include <vector>

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
  // One linear; OC / spec.groups must divide by tp.
  ColumnParallelLinear(const LayerContext& ctx, const LinearSpec& spec);
  // Linears of one input, each OC_p divisible by tp; every part's in_features the same.
  ColumnParallelLinear(const LayerContext& ctx, const std::vector<LinearSpec>& parts);
  int64_t local_out() const { return local_out_; }  // OC/tp, all parts together
  ColumnParallelLinearCache make_cache() const;
  ColumnParallelLinearGrads make_grads() const { return {}; }

  // out (N,OC/tp) = inp . W^T + b for inp (Nl,IC) (part after part: OC_p/tp columns of N rows).
  void forward(float* out, const float* inp, ColumnParallelLinearCache& cache);
  // Generation, one new row per sequence: out (B,OC/tp) = inp (B,IC) . W^T + b (no communication).
  // Generation: out (R, out) for R token rows, by the row-wise product (decode_rows.h).
  void decode(float* out, const float* inp, int64_t rows);
  // dinp (Nl,IC) = dout (N,OC/tp) . W, summed over tp (with sequence parallelism: this rank's
  // rows of the sum). with_weight: also the weight half (backward_weight), computed while the
  // sum is in flight, as Megatron overlaps it; the caller then skips backward_weight.
  void backward_input(float* dinp, const float* dout, const ColumnParallelLinearCache& cache,
                      ColumnParallelLinearGrads& grads, bool with_weight = false);
  // dW += dout^T . inp, db += column sums of dout, over all N rows.
  void backward_weight(const ColumnParallelLinearCache& cache,
                       const ColumnParallelLinearGrads& grads);

 private:
  struct Part {
    int64_t local_out;  // OC_p/tp
    int64_t offset;     // of its columns in a row of the whole output (times rows: its block)
    LinearParameters params;
  };
  // out_rows: N, or B for a decode step.
  void run_forward(float* out, const float* inp, int64_t rows);

  int64_t in_, local_out_ = 0;
  std::vector<Part> parts_;
};

}  // namespace gpt
