// The last stage's head: ln_f (the Llama family's final "norm"), logits against the tied wte or
// the untied lm_head.weight (vocabulary-parallel: each tp rank
// computes its Vp/tp columns; full logits are never gathered), and the vocabulary-parallel
// softmax cross-entropy (row max, sum of exponentials and target logit reduced across tp).
// Its "output" is the per-token losses and its output gradient the loss scale; the backward
// turns the cached logits into their gradient in place. Caches and grads as transformer_block.h.
#pragma once

#include <functional>

#include "framework/config.h"
#include "framework/device_array.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"

namespace gpt {

struct HeadCache {
  LayerNormCache ln_f;               // its input is the head's
  DeviceArray<float> lnf_out;        // (N,C) ln_f's output, all N rows
  const int32_t* targets = nullptr;  // (N) forward's targets (the caller's buffer)
  DeviceArray<float> logits;         // (N,Vp/tp); dlogits after backward_input
  DeviceArray<float> row_max;        // (N) max logit over the whole vocabulary
  DeviceArray<float> row_sumexp;     // (N) sum of exp(logit - row_max)
  DeviceArray<float> target_logit;   // (N)
  DeviceArray<float> losses;         // (N) per-token cross-entropy
};

struct HeadGrads {
  DeviceArray<float> d_lnf_out;  // (Nl,C) ln_f's output gradient
  LayerNormGrads ln_f;
};

class LmHead : Layer {
 public:
  // wte: the tied token embedding, or the untied head's own matrix; final_norm: the family's.
  LmHead(const LayerContext& ctx, const ModelConfig& cfg, const NormSpec& final_norm,
         Parameter& wte);
  HeadCache make_cache() const;
  HeadGrads make_grads() const;

  // Per-token losses into cache.losses (N) for inp (Nl,C) and targets (N) in backend memory.
  void forward(const float* inp, const int32_t* targets, HeadCache& cache);
  // dinp (Nl,C) = the gradient of loss_scale * (sum of the token losses). with_weight: also the
  // logits product's weight gradient, computed while ln_f's output gradient is reduced over tp
  // (then backward_weight is told logits_weight_done).
  void backward_input(float* dinp, float loss_scale, HeadCache& cache, HeadGrads& grads,
                      bool with_weight = false);
  void backward_weight(const HeadCache& cache, const HeadGrads& grads,
                       bool logits_weight_done = false);

  // Generation: a cache of `rows` rows with logits (no loss statistics), and decode: ln_f and
  // this rank's logits (R,Vp/tp) into cache.logits for R rows inp (R,C), by the row-wise product.
  HeadCache make_decode_cache(int64_t rows) const;
  void decode(const float* inp, HeadCache& cache, int64_t rows);

 private:
  void logits_weight_gradient(const HeadCache& cache);  // wte's gradient += dlogits^T . ln_f out

  int64_t C_;
  VocabShard shard_;
  LayerNorm ln_f_;
  Parameter& wte_;
  bool sp_;
};

}  // namespace gpt
