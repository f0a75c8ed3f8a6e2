// The last stage's head: ln_f, logits against the tied wte (vocabulary-parallel: each tp rank
// computes its Vp/tp columns; full logits are never gathered), and the vocabulary-parallel
// softmax cross-entropy (row max, sum of exponentials and target logit reduced across tp).
// The backward turns the cached logits into their gradient in place.
#pragma once

#include "framework/config.h"
#include "framework/device_array.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"

namespace gpt {

// Nl = the rows of this rank's residual stream: N, or N/tp with sequence parallelism.
struct HeadCache {
  DeviceArray<float> lnf_out, lnf_mean, lnf_rstd;  // (N,C) all rows, (Nl), (Nl)
  DeviceArray<float> logits;                       // (N, Vp/tp); dlogits after backward_input
  DeviceArray<float> row_max, row_sumexp, target_logit, losses;  // (N) each
};

struct HeadGrads {
  DeviceArray<float> d_lnf_out;  // (Nl,C)
};

class LmHead {
 public:
  LmHead(ParameterStore& store, TensorParallel& tp, const ModelConfig& cfg, Parameter& wte);
  HeadCache make_cache(int64_t B) const;
  HeadGrads make_grads(int64_t B) const;

  // Per-token losses into cache.losses (N) for inp (Nl,C) and targets (N) in backend memory.
  // With sequence parallelism ln_local (Nl,C) is scratch for ln_f's rows before the gather.
  void forward(const float* inp, const int32_t* targets, HeadCache& cache, float* ln_local,
               int64_t B);
  // dinp (Nl,C) = gradient of loss_scale * sum of the token losses; partial (N,C) is scratch
  // with sequence parallelism.
  void backward_input(float* dinp, const float* inp, const int32_t* targets, HeadCache& cache,
                      HeadGrads& grads, float loss_scale, float* partial, int64_t B);
  void backward_weight(const float* inp, HeadCache& cache, HeadGrads& grads, int64_t B);

 private:
  Backend& backend_;
  TensorParallel& tp_;
  int64_t C_, T_;
  VocabShard shard_;
  LayerNorm ln_f_;
  Parameter& wte_;
  bool sp_;
};

}  // namespace gpt
