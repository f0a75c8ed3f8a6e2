// LayerNorm over d_model (eps 1e-5), weight 1 and bias 0 at init, replicated on every tp rank.
// The cache holds the per-row mean and reciprocal standard deviation for the backward. With
// sequence parallelism it sees this rank's rows only, so its parameter gradients are partial
// sums that the trainer adds up over tp (ParameterSpec::tp_partial_grad).
#pragma once

#include <string>

#include "framework/parameter.h"

namespace gpt {

struct LayerNormCache {
  float* mean;  // (N)
  float* rstd;  // (N)
};

class LayerNorm {
 public:
  LayerNorm(ParameterStore& store, const std::string& name, int64_t C,
            bool sequence_parallel = false, int tp_size = 1);
  // Rows this LayerNorm sees out of the N = B*T of a microbatch.
  int64_t local_rows(int64_t N) const { return N / row_split_; }
  // out (N,C) = LN(inp)
  void forward(float* out, const LayerNormCache& cache, const float* inp, int64_t N);
  // dinp (N,C) += the input gradient of dout
  void backward_input(float* dinp, const float* dout, const float* inp, const LayerNormCache& cache,
                      int64_t N);
  void backward_weight(const float* dout, const float* inp, const LayerNormCache& cache, int64_t N);

 private:
  Backend& backend_;
  int64_t C_;
  int64_t row_split_;
  Parameter* weight_;
  Parameter* bias_;
};

}  // namespace gpt
