// The normalisation layers of a NormSpec (the model family's): LayerNorm (weight 1 and bias 0 at
// init, eps 1e-5) or RMSNorm (weight only, the spec's eps), over the last dimension, replicated on
// every tp rank. A block's norms run on the Nl rows of this rank's residual stream: all N, or
// N/tp with sequence parallelism, where their parameter gradients are partial sums that the
// trainer adds up over tp (ParameterSpec::tp_partial_grad). Qwen3's q and k norms run on each
// head of this rank's heads (N * heads rows of head_dim): their gradients are partial over tp
// whenever tp > 1.
#pragma once

#include <string>

#include "framework/device_array.h"
#include "framework/families/model_family.h"
#include "framework/parameter.h"
#include "layers/layer.h"

namespace gpt {

struct LayerNormCache {
  const float* inp = nullptr;  // (rows,C) the input (the caller's buffer)
  DeviceArray<float> mean;     // (rows) LayerNorm only
  DeviceArray<float> rstd;     // (rows) 1/sqrt(var + eps), or 1/sqrt(mean square + eps)
};

struct LayerNormGrads {
  const float* dout = nullptr;  // (rows,C) the output gradient (the caller's buffer)
};

class LayerNorm : Layer {
 public:
  LayerNorm(const LayerContext& ctx, const NormSpec& spec);
  LayerNormCache make_cache() const;
  LayerNormGrads make_grads() const { return {}; }

  // out (rows,C) = norm(inp (rows,C))
  void forward(float* out, const float* inp, LayerNormCache& cache);
  // Generation: the rows of one new token per sequence (B, or B * heads), into a cache of them.
  LayerNormCache make_decode_cache(int64_t rows) const;
  void decode(float* out, const float* inp, LayerNormCache& cache, int64_t rows);
  // dinp (rows,C) += the input gradient of dout (rows,C): norm inputs are residual streams.
  void backward_input(float* dinp, const float* dout, const LayerNormCache& cache,
                      LayerNormGrads& grads);
  void backward_weight(const LayerNormCache& cache, const LayerNormGrads& grads);

 private:
  void run_forward(float* out, const float* inp, LayerNormCache& cache, int64_t rows);

  int64_t C_, rows_, heads_per_row_;
  bool rms_;
  float eps_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;  // LayerNorm only
};

}  // namespace gpt
