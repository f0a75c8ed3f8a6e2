// One pre-norm block: x1 = x + attn(ln_1(x)); y = x1 + mlp(ln_2(x1)), on the Nl rows of this
// rank's residual stream (N = B*T, or N/tp with sequence parallelism), as the model family
// describes it (framework/families/): its norms, attention and MLP, with their parameters'
// names. This header also states the contract every layer follows.
#pragma once

#include <string>

#include "layers/attention.h"
#include "layers/layernorm.h"
#include "layers/mlp.h"

namespace gpt {

// The layer contract, shared by LayerNorm, the two linears, Attention, Mlp and this block (the
// embedding and the head follow it with the shapes their work needs):
//
//   forward(out, inp, cache)                  out from inp; fills cache
//   backward_input(dinp, dout, cache, grads)  dinp from dout; fills grads
//   backward_weight(cache, grads)             parameter gradients +=
//
// - A layer is built for one microbatch shape (MicroBatchShape), so the calls take no sizes.
// - Its cache (make_cache(), one per in-flight microbatch) is what its backward reads: the
//   buffers forward writes and a pointer to the input forward read, which the caller keeps alive
//   until the backward. Running forward on that input again rebuilds a dropped cache (activation
//   recomputation); a block's input is cache.ln_1.inp.
// - Its grads (make_grads()) are what the weight half reads after the input half: output
//   gradients, recorded by backward_input, so a zero-bubble schedule can run the halves apart.
// - Scratch that no call outlives is shared by every layer of a stage (LayerScratch) and handed
//   over at construction; caches and grads never point into it.
// - Generation: decode(out, inp, cache, ..., rows) is forward for a step's token rows (any
//   sequences at any positions, no sequence parallelism; decode_rows.h), into a cache of at
//   least that many rows from make_decode_cache(); what must outlive the call (the attention's
//   keys and values of earlier positions) is in the paged pool, a KvCache.

struct BlockCache {
  LayerNormCache ln_1;         // its input is the block's
  DeviceArray<float> ln1_out;  // (N,C) c_attn's input; without sequence parallelism only (with it,
                               // ln_1 writes scratch and c_attn's cache keeps the gathered rows)
  AttentionCache attn;
  DeviceArray<float> res_mid;  // (Nl,C) x1 = x + attn
  LayerNormCache ln_2;
  DeviceArray<float> ln2_out;  // (N,C) c_fc's input; likewise
  MlpCache mlp;
};

struct BlockGrads {
  MlpGrads mlp;
  DeviceArray<float> d_ln2_out;  // (Nl,C)
  LayerNormGrads ln_2;
  DeviceArray<float> d_res_mid;  // (Nl,C) gradient of x1
  AttentionGrads attn;
  DeviceArray<float> d_ln1_out;  // (Nl,C)
  LayerNormGrads ln_1;
};

class TransformerBlock : Layer {
 public:
  // Block `layer` of the model: its parameters (the family's block_parameters) and description.
  TransformerBlock(const LayerContext& ctx, const ModelConfig& cfg, const BlockParameters& p,
                   const BlockDescription& d);
  BlockCache make_cache() const;
  BlockGrads make_grads() const;

  // out (Nl,C) = block(inp (Nl,C)).
  void forward(float* out, const float* inp, BlockCache& cache);
  // dinp (Nl,C) = the input gradient of dout (Nl,C); fills grads for the weight half.
  // column_weights: the column-parallel linears' (c_attn, c_fc) weight gradients too, each
  // computed while its input gradient's tp reduction is in flight (a whole backward, when the
  // weight half follows at once); backward_weight is then told column_weights_done.
  void backward_input(float* dinp, const float* dout, const BlockCache& cache, BlockGrads& grads,
                      bool column_weights = false);
  // Parameter gradients += from cache and grads (filled by backward_input of the same microbatch).
  void backward_weight(const BlockCache& cache, const BlockGrads& grads,
                       bool column_weights_done = false);

  // Generation (without sequence parallelism; decode_rows.h): a cache of `rows` rows for decode,
  // and the block's paged key/value pool.
  BlockCache make_decode_cache(int64_t rows, int64_t max_positions) const;
  KvCache make_kv_cache(int64_t blocks, int64_t block_tokens) const {
    return attn_.make_kv_cache(blocks, block_tokens);
  }
  // out (R,C) = block(inp (R,C)) for R token rows, attending over the keys and values in kv
  // (which gains the rows').
  void decode(float* out, const float* inp, BlockCache& cache, KvCache& kv, const DecodeRows& rows);

 private:
  bool sp_;
  int64_t C_;
  LayerNorm ln_1_;
  Attention attn_;
  LayerNorm ln_2_;
  Mlp mlp_;
};

}  // namespace gpt
