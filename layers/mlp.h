// The MLP sublayer: c_fc column-parallel (4C/tp features per rank), GELU (tanh), c_proj
// row-parallel with one all-reduce forward; the c_fc input gradient is all-reduced backward.
#pragma once

#include <string>

#include "framework/config.h"
#include "layers/linear.h"

namespace gpt {

struct MlpCache {
  float* fc_pre;  // (N, 4C/tp) c_fc output
  float* fc_act;  // (N, 4C/tp) GELU of it
};

class Mlp {
 public:
  Mlp(ParameterStore& store, TensorParallel& tp, const std::string& name, const ModelConfig& cfg);
  int64_t local_ffn() const { return c_fc_.local_out(); }

  // Buffers as Attention's: with sequence parallelism inp, out, dout and dinp hold this rank's
  // rows, inp_full and dout_full receive all rows, partial (N,C) is scratch.
  void forward(float* out, const float* inp, float* inp_full, float* partial, const MlpCache& cache,
               int64_t N);
  // dfc_pre (N,4C/tp) is kept for the weight half; dfc_act (N,4C/tp) is scratch; dinp written.
  void backward_input(float* dinp, float* dfc_pre, float* dfc_act, const float* dout,
                      float* dout_full, float* partial, const MlpCache& cache, int64_t N);
  void backward_weight(const float* dout_full, const float* dfc_pre, const float* inp_full,
                       const MlpCache& cache, int64_t N);

 private:
  Backend& backend_;
  Linear c_fc_, c_proj_;
};

}  // namespace gpt
