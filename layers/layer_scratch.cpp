// Sizes of the stage's shared scratch (see layer_scratch.h).
#include "layers/layer_scratch.h"

namespace gpt {

LayerScratch make_layer_scratch(Backend& be, const ModelConfig& cfg, const TensorParallel& tp,
                                const MicroBatchShape& mb) {
  const int64_t local_heads = cfg.n_head / tp.size(), C = cfg.d_model;
  const bool sp = tp.sequence_parallel();
  return {.d_atty = {be, mb.N * local_heads * cfg.head_dim()},
          .d_att = {be, be.attention_scratch_floats(mb.B, local_heads, mb.T)},
          .d_fc_act = {be, mb.N * cfg.ffn_dim() / tp.size()},
          .partial = {be, sp ? mb.N * C : 0},
          .ln_local = {be, sp ? mb.Nl * C : 0}};
}

}  // namespace gpt
