// The MLP sublayer. GELU: c_fc column-parallel (F/tp features per rank), GELU (tanh), c_proj
// row-parallel (GPT-2). SwiGLU: gate_proj and up_proj the two parts of one column-parallel layer,
// silu(gate) * up, down_proj row-parallel (the Llama family, without biases). One all-reduce
// forward (the output), one backward (the input gradient).
#pragma once

#include <string>

#include "framework/families/model_family.h"
#include "layers/column_parallel_linear.h"
#include "layers/row_parallel_linear.h"

namespace gpt {

struct MlpCache {
  ColumnParallelLinearCache c_fc;  // its input, all N rows
  DeviceArray<float> fc_pre;       // (N,F/tp) c_fc's output; Llama: gate's, then up's
  DeviceArray<float> fc_act;       // (N,F/tp) GELU of it, or SwiGLU of the two; c_proj's input
  RowParallelLinearCache c_proj;
};

struct MlpGrads {
  RowParallelLinearGrads c_proj;  // the output gradient, all N rows
  DeviceArray<float> dfc_pre;     // c_fc's output gradient, shaped as fc_pre
  ColumnParallelLinearGrads c_fc;
};

class Mlp : Layer {
 public:
  // The block's parameters and description (the model family's).
  Mlp(const LayerContext& ctx, const BlockParameters& p, const BlockDescription& d);
  MlpCache make_cache() const;
  MlpGrads make_grads() const;

  // out (Nl,C) = c_proj(act(c_fc(inp (Nl,C)))), reduced over tp.
  void forward(float* out, const float* inp, MlpCache& cache);
  // Generation: the same for one new row per sequence, inp and out (B,C), into a cache of B rows.
  MlpCache make_decode_cache(int64_t rows) const;
  void decode(float* out, const float* inp, MlpCache& cache, int64_t rows);
  // dinp (Nl,C) = the input gradient of dout (Nl,C), reduced over tp. column_weights: c_fc's
  // weight half too, behind its tp reduction (then backward_weight skips it: column_weights_done).
  void backward_input(float* dinp, const float* dout, const MlpCache& cache, MlpGrads& grads,
                      bool column_weights = false);
  void backward_weight(const MlpCache& cache, const MlpGrads& grads,
                       bool column_weights_done = false);

 private:
  // fc_act (rows, F/tp) from fc_pre.
  void activate(float* act, const float* pre, int64_t rows);

  bool swiglu_;
  int64_t local_ffn_;
  ColumnParallelLinear c_fc_;
  RowParallelLinear c_proj_;
};

}  // namespace gpt
