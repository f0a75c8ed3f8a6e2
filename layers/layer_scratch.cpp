// The stage's shared scratch, sized by the memory model (see layer_scratch.h).
#include "layers/layer_scratch.h"

#include "framework/rotary_table.h"

namespace gpt {

LayerScratch make_layer_scratch(Backend& be, const ModelConfig& model, const LayerSizes& s,
                                const ChunkRecompute& recompute) {
  constexpr MemoryCategory kScratch = MemoryCategory::kWorkspace;
  LayerScratch scratch{
      .d_atty = {be, s.attention_out(), kScratch},
      .d_att = {be, s.attention_scratch(), kScratch},
      .d_fc_act = {be, s.ffn(), kScratch},
      .partial = {be, s.partial(), kScratch},
      .ln_local = {be, s.ln_local(), kScratch},
      .att_rebuilt = {be, s.attention_rebuilt(), kScratch},
      .recomputed_out = {be, recompute.full_blocks > 0 ? s.residual() : 0, kScratch},
      .rotary = {be, s.rotary_table(), kScratch}};
  if (s.rotary) {
    const std::vector<float> table = rotary_table(model, s.T);
    be.copy_from_host(scratch.rotary.data(), table.data(), sizeof(float) * table.size());
  }
  return scratch;
}

}  // namespace gpt
