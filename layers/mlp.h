// The MLP sublayer: c_fc column-parallel (4C/tp features per rank), GELU (tanh), c_proj
// row-parallel with one all-reduce forward; the c_fc input gradient is all-reduced backward.
#pragma once

#include <string>

#include "framework/config.h"
#include "layers/column_parallel_linear.h"
#include "layers/row_parallel_linear.h"

namespace gpt {

struct MlpCache {
  ColumnParallelLinearCache c_fc;  // its input, all N rows
  DeviceArray<float> fc_pre;       // (N,4C/tp) c_fc's output
  DeviceArray<float> fc_act;       // (N,4C/tp) GELU of it, c_proj's input
  RowParallelLinearCache c_proj;
};

struct MlpGrads {
  RowParallelLinearGrads c_proj;  // the output gradient, all N rows
  DeviceArray<float> dfc_pre;     // (N,4C/tp) c_fc's output gradient
  ColumnParallelLinearGrads c_fc;
};

class Mlp : Layer {
 public:
  Mlp(const LayerContext& ctx, const std::string& name, const ModelConfig& cfg);
  MlpCache make_cache() const;
  MlpGrads make_grads() const;

  // out (Nl,C) = c_proj(gelu(c_fc(inp (Nl,C)))), reduced over tp.
  void forward(float* out, const float* inp, MlpCache& cache);
  // Generation: the same for one new row per sequence, inp and out (B,C), into a cache of B rows.
  MlpCache make_decode_cache() const;
  void decode(float* out, const float* inp, MlpCache& cache);
  // dinp (Nl,C) = the input gradient of dout (Nl,C), reduced over tp.
  void backward_input(float* dinp, const float* dout, const MlpCache& cache, MlpGrads& grads);
  void backward_weight(const MlpCache& cache, const MlpGrads& grads);

 private:
  ColumnParallelLinear c_fc_;
  RowParallelLinear c_proj_;
};

}  // namespace gpt
