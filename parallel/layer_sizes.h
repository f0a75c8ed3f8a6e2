// What the layers of one model chunk allocate, as one set of sizes that both sides read: the
// layers size every buffer with LayerSizes, and the memory model (memory_model.h) sums the same
// sizes, so its prediction equals the ledger to the byte on the CPU backend. Also the user option
// these sizes depend on, --recompute, and how one chunk applies it.
#pragma once

#include <cstdint>
#include <string>

#include "framework/backend.h"
#include "framework/config.h"
#include "parallel/stage_layout.h"

namespace gpt {

// Activation recomputation (Korthikanti et al. 2022): kSelective drops what is quadratic in the
// sequence length inside attention (the CPU backend's softmax probabilities) and rebuilds it in
// the backward from the kept q, k, v; kFull keeps only each block's input and re-runs the block's
// forward before its backward.
enum class Recompute { kNone, kSelective, kFull };
inline constexpr Recompute kRecomputeModes[] = {Recompute::kNone, Recompute::kSelective,
                                                Recompute::kFull};
// "none", "selective", "full": --recompute's names (launch/runtime/typed_options.h parses them).
const char* recompute_name(Recompute mode);

// How one model chunk recomputes: the mode, how many of its blocks (the first ones) a full
// recomputation covers, and whether its schedule runs B-input and W apart (ZB-H1; the recomputed
// blocks still run their W inside their B-input, on the one rebuilt cache).
struct ChunkRecompute {
  Recompute mode = Recompute::kNone;
  int64_t full_blocks = 0;  // blocks recomputed in full: the first full_blocks of the chunk
  bool split_backward = false;
};

// The floats of each buffer the layers of one chunk allocate for its microbatch shape: B
// sequences of T tokens, N = B*T rows, Nl of them in the LayerNorm and residual regions (N/tp with
// sequence parallelism). Layers allocate with these; predict_memory sums them.
struct LayerSizes {
  int64_t B = 0, T = 0, N = 0, Nl = 0, C = 0;
  int64_t local_heads = 0, local_channels = 0, local_ffn = 0, local_vocab = 0;
  int64_t local_kv_heads = 0, local_kv_channels = 0, head_dim = 0;
  int64_t ffn_parts = 1;  // linears of the MLP's input: c_fc (GELU), or gate and up (SwiGLU)
  bool rms_norm = false;  // RMSNorms keep no mean
  bool qk_norm = false;   // per-head q and k norms (Qwen3)
  bool rotary = false;    // rotary positions
  bool sequence_parallel = false;
  DeviceKind device = DeviceKind::kCpu;
  bool drop_attention_cache = false;  // selective recomputation of a quadratic attention cache

  int64_t residual() const { return Nl * C; }  // block inputs and outputs, x1, their gradients
  // bf16 values of a 16-bit pipeline message of a residual: even, as it travels in 4-byte words
  int64_t residual_wire() const { return (residual() + 1) / 2 * 2; }
  int64_t ln_stats() const { return Nl; }                // a norm's rstd
  int64_t ln_mean() const { return rms_norm ? 0 : Nl; }  // a LayerNorm's mean
  // A LayerNorm's output as the next linear reads it (all N rows); with sequence parallelism the
  // linear's all-gathered copy is kept instead (gathered_rows), and this is empty.
  int64_t ln_out() const { return sequence_parallel ? 0 : N * C; }
  int64_t gathered_rows() const { return sequence_parallel ? N * C : 0; }
  // q, k and v of the local heads: GPT-2's fused rows, or Llama's three blocks.
  int64_t qkv() const { return N * (local_channels + 2 * local_kv_channels); }
  // Qwen3: q and k before their norms, and each norm's rstd per (row, head).
  int64_t qk_pre() const { return qk_norm ? N * (local_channels + local_kv_channels) : 0; }
  int64_t q_norm_stats() const { return qk_norm ? N * local_heads : 0; }
  int64_t k_norm_stats() const { return qk_norm ? N * local_kv_heads : 0; }
  int64_t rotary_table() const { return rotary ? T * head_dim : 0; }  // (T, HS) cos | sin
  int64_t attention_out() const { return N * local_channels; }
  int64_t attention_cache() const {  // what attention_forward keeps for the backward
    return drop_attention_cache ? 0 : attention_cache_floats(device, B, local_heads, T);
  }
  int64_t attention_rebuilt() const {  // selective: where the backward rebuilds it
    return drop_attention_cache ? attention_cache_floats(device, B, local_heads, T) : 0;
  }
  int64_t attention_scratch() const { return attention_scratch_floats(device, B, local_heads, T); }
  int64_t ffn() const { return N * local_ffn; }         // the MLP's activation (down's input)
  int64_t ffn_in() const { return ffn_parts * ffn(); }  // its input linears' outputs
  int64_t head_rows() const { return N * C; }           // ln_f's output, all N rows
  int64_t logits() const { return N * local_vocab; }
  int64_t row_stat() const { return N; }  // a per-token loss statistic
  int64_t tokens() const { return N; }    // int32 tokens or targets of a microbatch
  int64_t partial() const { return sequence_parallel ? N * C : 0; }
  // Under bf16 precision a block cache keeps its activations in 16 bits and its statistics in
  // float32 (layers/stored_block_cache.h): the elements of each part. The attention cache is the
  // CPU's softmax probabilities (activations) or CUDA's log-sum-exp per row (statistics).
  int64_t stored_activations() const {
    const int64_t probabilities = attention_cache_is_quadratic(device) ? attention_cache() : 0;
    return 2 * (ln_out() + gathered_rows()) + qkv() + qk_pre() + attention_out() + residual() +
           ffn_in() + ffn() + probabilities;
  }
  int64_t ln_local() const { return sequence_parallel ? Nl * C : 0; }
};

LayerSizes layer_sizes(const ModelConfig& model, int tp, bool sequence_parallel,
                       int64_t micro_batch, DeviceKind device, Recompute recompute);

// Whether block `block` of a chunk runs its weight half right after its input half, inside
// B-input, instead of in W (the one rule the stage, the memory model, the cost model and train's
// bubble share; layers/model_stage.h says why). A block recomputed in full always does: its rebuilt
// cache is the chunk's shared one, which the next block reuses, and keeping one per block until a
// split W (ZB-H1) would hold more than not recomputing. In a whole B (no split backward) so do
// the blocks stored in 16 bits (bf16), also on the shared cache, and every block of the first
// virtual stage, whose input gradient nobody waits for.
bool weight_half_at_once(const ChunkRecompute& recompute, bool first_virtual_stage, bool bf16,
                         int64_t block);
// How many of the chunk's n blocks do.
int64_t weight_halves_at_once(const ChunkRecompute& recompute, bool first_virtual_stage, bool bf16,
                              int64_t n);

// How the chunk `spec` recomputes under --recompute and --recompute-layers (0 = every block).
ChunkRecompute chunk_recompute(Recompute mode, int64_t recompute_layers, const StageSpec& spec,
                               bool split_backward);

}  // namespace gpt
