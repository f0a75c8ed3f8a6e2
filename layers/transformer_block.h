// One pre-LayerNorm GPT-2 block: x1 = x + attn(ln_1(x)); y = x1 + mlp(ln_2(x1)).
// BlockCache is what the backward reads (one per in-flight microbatch); BlockGrads is what the
// weight half reads after the input half (the output gradients of every linear and LayerNorm),
// so a zero-bubble schedule can run the two halves apart. Sizes: N = B*T rows, C = d_model,
// Nl = the rows of the LayerNorm and residual regions on this rank: N, or N/tp with sequence
// parallelism, where the block's input, output and residual stream hold this rank's Nl rows.
#pragma once

#include <string>

#include "framework/device_array.h"
#include "layers/attention.h"
#include "layers/layernorm.h"
#include "layers/mlp.h"

namespace gpt {

struct BlockCache {
  DeviceArray<float> ln1_mean, ln1_rstd;  // (Nl) each
  DeviceArray<float> ln1_out;             // (N,C) c_attn's input, all rows
  DeviceArray<float> qkv, att, atty;      // (N,3C/tp), attention cache, (N,C/tp)
  DeviceArray<float> res_mid;             // (Nl,C) x + attn
  DeviceArray<float> ln2_mean, ln2_rstd;  // (Nl) each
  DeviceArray<float> ln2_out;             // (N,C) c_fc's input, all rows
  DeviceArray<float> fc_pre, fc_act;      // (N,4C/tp) each
};

struct BlockGrads {
  DeviceArray<float> d_out;                 // (Nl,C) gradient of the block output (the caller's)
  DeviceArray<float> d_res_mid;             // (Nl,C) gradient of x + attn
  DeviceArray<float> d_ln1_out, d_ln2_out;  // (Nl,C)
  DeviceArray<float> d_qkv;                 // (N,3C/tp)
  DeviceArray<float> d_fc_pre;              // (N,4C/tp)
  DeviceArray<float> d_out_full, d_res_mid_full;  // (N,C) all rows; sequence parallel only
};

// Scratch shared by every layer of a stage: read only inside one call.
struct BlockScratch {
  DeviceArray<float> d_atty;    // (N,C/tp)
  DeviceArray<float> d_att;     // attention scratch (attention_scratch_floats)
  DeviceArray<float> d_fc_act;  // (N,4C/tp)
  DeviceArray<float> partial;   // (N,C) partial sums before a reduce-scatter; sequence parallel
  DeviceArray<float> ln_local;  // (Nl,C) a LayerNorm output before its all-gather; likewise
};

class TransformerBlock {
 public:
  TransformerBlock(ParameterStore& store, TensorParallel& tp, int64_t layer,
                   const ModelConfig& cfg);

  BlockCache make_cache(int64_t B) const;
  BlockGrads make_grads(int64_t B) const;
  BlockScratch make_scratch(int64_t B) const;

  // out (Nl,C) = block(inp (Nl,C)); inp must stay untouched until the backward.
  void forward(float* out, const float* inp, BlockCache& cache, BlockScratch& scratch, int64_t B);
  // From grads.d_out, writes dinp (Nl,C) and the rest of grads.
  void backward_input(float* dinp, const float* inp, BlockCache& cache, BlockGrads& grads,
                      BlockScratch& scratch, int64_t B);
  // Parameter gradients += from grads (filled by backward_input of the same microbatch).
  void backward_weight(const float* inp, BlockCache& cache, BlockGrads& grads, int64_t B);

 private:
  Backend& backend_;
  bool sp_;
  int64_t C_, T_;
  LayerNorm ln_1_;
  Attention attn_;
  LayerNorm ln_2_;
  Mlp mlp_;
};

}  // namespace gpt
