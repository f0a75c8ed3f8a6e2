// One pre-LayerNorm GPT-2 block: x1 = x + attn(ln_1(x)); y = x1 + mlp(ln_2(x1)).
// BlockCache is what the backward reads (one per in-flight microbatch); BlockGrads is what the
// weight half reads after the input half (the output gradients of every linear and LayerNorm),
// so a zero-bubble schedule can run the two halves apart. Sizes: N = B*T rows, C = d_model.
#pragma once

#include <string>

#include "framework/device_array.h"
#include "layers/attention.h"
#include "layers/layernorm.h"
#include "layers/mlp.h"

namespace gpt {

struct BlockCache {
  DeviceArray<float> ln1_out, ln1_mean, ln1_rstd;  // (N,C), (N), (N)
  DeviceArray<float> qkv, att, atty;               // (N,3C/tp), (B,NH/tp,T,T), (N,C/tp)
  DeviceArray<float> res_mid;                      // (N,C) x + attn
  DeviceArray<float> ln2_out, ln2_mean, ln2_rstd;  // (N,C), (N), (N)
  DeviceArray<float> fc_pre, fc_act;               // (N,4C/tp) each
};

struct BlockGrads {
  DeviceArray<float> d_out;                 // (N,C) gradient of the block output; set by the caller
  DeviceArray<float> d_res_mid;             // (N,C) gradient of x + attn
  DeviceArray<float> d_ln1_out, d_ln2_out;  // (N,C)
  DeviceArray<float> d_qkv;                 // (N,3C/tp)
  DeviceArray<float> d_fc_pre;              // (N,4C/tp)
};

// Scratch shared by every block of a stage: read only inside one backward_input call.
struct BlockScratch {
  DeviceArray<float> d_atty;    // (N,C/tp)
  DeviceArray<float> d_att;     // (B,NH/tp,T,T)
  DeviceArray<float> d_fc_act;  // (N,4C/tp)
};

class TransformerBlock {
 public:
  TransformerBlock(ParameterStore& store, TensorParallel& tp, int64_t layer,
                   const ModelConfig& cfg);

  BlockCache make_cache(int64_t B) const;
  BlockGrads make_grads(int64_t B) const;
  BlockScratch make_scratch(int64_t B) const;

  // out (N,C) = block(inp (N,C)); inp must stay untouched until the backward.
  void forward(float* out, const float* inp, BlockCache& cache, int64_t B);
  // From grads.d_out, writes dinp (N,C) and the rest of grads.
  void backward_input(float* dinp, const float* inp, BlockCache& cache, BlockGrads& grads,
                      BlockScratch& scratch, int64_t B);
  // Parameter gradients += from grads (filled by backward_input of the same microbatch).
  void backward_weight(const float* inp, BlockCache& cache, BlockGrads& grads, int64_t B);

 private:
  Backend& backend_;
  int64_t C_, T_;
  LayerNorm ln_1_;
  Attention attn_;
  LayerNorm ln_2_;
  Mlp mlp_;
};

}  // namespace gpt
