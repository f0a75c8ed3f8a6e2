// LayerNorm over d_model (eps 1e-5), weight 1 and bias 0 at init, replicated on every tp rank.
// It runs on the Nl rows of this rank's residual stream: all N, or N/tp with sequence
// parallelism, where its parameter gradients are partial sums that the trainer adds up over tp
// (ParameterSpec::tp_partial_grad).
#pragma once

#include <string>

#include "framework/device_array.h"
#include "framework/parameter.h"
#include "layers/layer.h"

namespace gpt {

struct LayerNormCache {
  const float* inp = nullptr;  // (Nl,C) the input (the caller's buffer)
  DeviceArray<float> mean;     // (Nl)
  DeviceArray<float> rstd;     // (Nl) 1/sqrt(var + eps)
};

struct LayerNormGrads {
  const float* dout = nullptr;  // (Nl,C) the output gradient (the caller's buffer)
};

class LayerNorm : Layer {
 public:
  LayerNorm(const LayerContext& ctx, const std::string& name, int64_t C);
  LayerNormCache make_cache() const;
  LayerNormGrads make_grads() const { return {}; }

  // out (Nl,C) = LN(inp (Nl,C))
  void forward(float* out, const float* inp, LayerNormCache& cache);
  // Generation: out (B,C) = LN(inp (B,C)), one new row per sequence, into a cache of B rows.
  LayerNormCache make_decode_cache() const;
  void decode(float* out, const float* inp, LayerNormCache& cache);
  // dinp (Nl,C) += the input gradient of dout (Nl,C): LayerNorm inputs are residual streams.
  void backward_input(float* dinp, const float* dout, const LayerNormCache& cache,
                      LayerNormGrads& grads);
  void backward_weight(const LayerNormCache& cache, const LayerNormGrads& grads);

 private:
  int64_t C_, rows_;
  Parameter* weight_;
  Parameter* bias_;
};

}  // namespace gpt
