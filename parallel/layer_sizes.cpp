// The sizes the layers allocate and the memory model sums (see layer_sizes.h).
#include "parallel/layer_sizes.h"

#include <algorithm>
#include <iterator>

#include "framework/check.h"
#include "framework/families/model_family.h"

namespace gpt {

// The names --recompute takes, in the enum's order.
constexpr const char* kRecomputeNames[] = {"none", "selective", "full"};
static_assert(std::size(kRecomputeNames) == static_cast<size_t>(Recompute::kFull) + 1);

const char* recompute_name(Recompute mode) {
  return kRecomputeNames[static_cast<size_t>(mode)];
}

LayerSizes layer_sizes(const ModelConfig& model, int tp, bool sequence_parallel,
                       int64_t micro_batch, DeviceKind device, Recompute recompute) {
  LayerSizes s;
  s.B = micro_batch;
  s.T = model.seq_len;
  s.N = s.B * s.T;
  s.sequence_parallel = sequence_parallel && tp > 1;
  s.Nl = s.sequence_parallel ? s.N / tp : s.N;
  s.C = model.d_model;
  s.local_heads = model.n_head / tp;
  s.head_dim = model.head_dim();
  s.local_channels = s.local_heads * s.head_dim;
  s.local_kv_heads = model.kv_heads_per_rank(tp);
  s.local_kv_channels = model.kv_channels_per_rank(tp);
  const BlockDescription d = describe(model);
  s.ffn_parts = d.swiglu() ? 2 : 1;
  s.rms_norm = d.rms();
  s.qk_norm = d.qk_norm;
  s.rotary = d.rotary();
  s.local_ffn = model.ffn_dim() / tp;
  s.local_vocab = model.padded_vocab(tp) / tp;
  s.device = device;
  s.drop_attention_cache =
      recompute == Recompute::kSelective && attention_cache_is_quadratic(device);
  return s;
}

bool weight_half_at_once(const ChunkRecompute& recompute, bool first_virtual_stage, bool bf16,
                         int64_t block) {
  return block < recompute.full_blocks ||
         (!recompute.split_backward && (first_virtual_stage || bf16));
}

int64_t weight_halves_at_once(const ChunkRecompute& recompute, bool first_virtual_stage, bool bf16,
                              int64_t n) {
  int64_t count = 0;
  for (int64_t block = 0; block < n; ++block)
    count += weight_half_at_once(recompute, first_virtual_stage, bf16, block) ? 1 : 0;
  return count;
}

ChunkRecompute chunk_recompute(Recompute mode, int64_t recompute_layers, const StageSpec& spec,
                               bool split_backward) {
  ChunkRecompute rc;
  rc.mode = mode;
  rc.split_backward = split_backward;
  if (mode == Recompute::kFull)
    rc.full_blocks =
        recompute_layers == 0 ? spec.n_layers : std::min(recompute_layers, spec.n_layers);
  return rc;
}

}  // namespace gpt
