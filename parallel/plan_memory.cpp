// The planner's memory adapter (see plan_memory.h). Two regimes: this project's, from the
// buffers the layers allocate (layers/*.h caches, one per in-flight microbatch; fp32 values,
// gradients and AdamW state), with the CUDA backend's fused attention, which keeps the softmax's
// row statistics instead of the T x T probabilities; and Megatron's, from Korthikanti et al.
// 2022's activation formulas.
#include "parallel/plan_memory.h"

#include <algorithm>

namespace gpt {
namespace {

constexpr int64_t kFloat = 4;
// cuBLASLt's workspace the CUDA backend allocates (framework/cuda), per rank.
constexpr int64_t kGemmWorkspace = 32 << 20;

int64_t block_parameters(const ModelConfig& m, int tp) {
  const int64_t C = m.d_model, F = m.ffn_dim();
  // Column- and row-parallel weights are split over tp; LayerNorms and the row-parallel biases
  // are replicated.
  const int64_t split = 3 * C * C + 3 * C + C * C + F * C + F + C * F;
  return split / tp + 4 * C + 2 * C;
}

bool is_first(int stage) {
  return stage == 0;
}
bool is_last(const PlanLayout& l, int stage) {
  return stage == l.pp - 1;
}

// One block's cache in this project, bytes: what BlockCache holds for one microbatch.
int64_t block_cache_bytes(const ModelConfig& m, const PlanLayout& l) {
  const int64_t N = l.micro_batch * m.seq_len, C = m.d_model, tp = l.tp;
  const int64_t Nl = l.sequence_parallel ? N / tp : N;
  const int64_t rows_stats = 2 * Nl * 2;                   // ln_1, ln_2 mean and rstd
  const int64_t inputs = Nl * C + 2 * N * C;               // block input; ln outputs (all rows)
  const int64_t attention = N * 3 * C / tp + N * C / tp +  // qkv, attention output
                            l.micro_batch * (m.n_head / tp) * m.seq_len;  // row log-sum-exp
  const int64_t mlp = 2 * N * m.ffn_dim() / tp + Nl * C;                  // fc_pre, fc_act, res_mid
  return (rows_stats + inputs + attention + mlp) * kFloat;
}

// Megatron's activations per block and microbatch (Korthikanti et al. 2022, section 4, 16-bit
// activations, 1-byte dropout masks): s b h (34 + 5 a s / h) without parallelism; tensor
// parallelism divides all but the 10 s b h of the LayerNorm and dropout regions, which sequence
// parallelism divides too; selective drops the 5 a s / h attention-core term; full keeps 2 s b h.
int64_t megatron_block_bytes(const ModelConfig& m, const PlanLayout& l, bool recomputed) {
  const double s = m.seq_len, b = l.micro_batch, h = m.d_model, a = m.n_head, t = l.tp;
  const double sbh = s * b * h;
  if (recomputed) return static_cast<int64_t>(2 * sbh / (l.sequence_parallel ? t : 1));
  const double core = l.recompute == Recompute::kSelective ? 0 : 5 * a * s / h;
  const double replicated = l.sequence_parallel ? 10 / t : 10;
  return static_cast<int64_t>(sbh * (replicated + (24 + core) / t));
}

int64_t head_cache_bytes(const ModelConfig& m, const PlanLayout& l) {
  const int64_t N = l.micro_batch * m.seq_len;
  // ln_f output (all rows), the logits shard in fp32 and four row statistics.
  const int64_t floats = N * m.d_model + N * m.padded_vocab(l.tp) / l.tp + 4 * N;
  return floats * kFloat;
}

// Bytes of the activations stage `stage` holds at its peak: its caches in flight, each one
// chunk's worth of blocks (the recomputed ones keep only their input), and the head's.
int64_t activation_bytes(const ModelConfig& m, const PlanLayout& l, const Schedule& s, int stage) {
  const bool megatron = l.precision == PrecisionRegime::kMegatronMixed;
  const int64_t per_chunk = l.layers_per_chunk(m);
  const int64_t kept_bytes = megatron ? megatron_block_bytes(m, l, false) : block_cache_bytes(m, l);
  const int64_t input_bytes =
      megatron
          ? megatron_block_bytes(m, l, true)
          : (l.micro_batch * m.seq_len * m.d_model / (l.sequence_parallel ? l.tp : 1) * kFloat);
  // The caches in flight, each priced as the heaviest chunk's (chunks peak at different times,
  // so this bounds their sum from above).
  int64_t chunk_bytes = 0;
  for (int chunk = 0; chunk < l.virtual_stages; ++chunk) {
    const int64_t recomputed = l.recomputed_layers_in_chunk(m, chunk);
    chunk_bytes =
        std::max(chunk_bytes, (per_chunk - recomputed) * kept_bytes + recomputed * input_bytes);
  }
  int64_t bytes = s.stated_caches[static_cast<size_t>(stage)] * chunk_bytes;
  // A recomputed block's cache is rebuilt one at a time, just before its backward.
  if (l.recomputed_layers_per_stage(m) > 0) bytes += kept_bytes;
  if (is_last(l, stage)) {
    const int64_t head = head_cache_bytes(m, l) / (megatron ? 2 : 1);
    bytes += s.stated_b_caches[static_cast<size_t>(stage)] * head;
  }
  return bytes;
}

}  // namespace

int64_t stage_parameters(const ModelConfig& m, const PlanLayout& l, int stage) {
  int64_t n = (m.n_layer / l.pp) * block_parameters(m, l.tp);
  const int64_t wte = m.padded_vocab(l.tp) / l.tp * m.d_model;
  if (is_first(stage)) n += wte + m.seq_len * m.d_model;
  if (is_last(l, stage)) n += (l.pp > 1 ? wte : 0) + 2 * m.d_model;
  return n;
}

PlannedMemory stage_memory(const ModelConfig& m, const PlanLayout& l, const Schedule& s,
                           int stage) {
  const int64_t params = stage_parameters(m, l, stage);
  const bool megatron = l.precision == PrecisionRegime::kMegatronMixed;
  const int64_t shards = l.distributed_optimizer ? l.dp : 1;
  PlannedMemory mem;
  // Megatron: 16-bit weights, fp32 main gradients, fp32 master weights plus Adam's two moments
  // (18 bytes per parameter); this project: fp32 values and gradients, AdamW's two moments.
  mem.weights = params * (megatron ? 2 : kFloat);
  mem.grads = params * kFloat;
  mem.optimizer = params * (megatron ? 3 : 2) * kFloat / shards;
  mem.activations = activation_bytes(m, l, s, stage);
  // Point-to-point buffers: an activation and a gradient to send and to receive.
  const int64_t rows = l.micro_batch * m.seq_len / (l.sequence_parallel ? l.tp : 1);
  mem.comm = l.pp > 1 ? 4 * rows * m.d_model * (megatron ? 2 : kFloat) : 0;
  // Scratch no call outlives: the widest layer temporaries (two (N, 4C/tp) buffers) and the
  // GEMM library's workspace.
  const int64_t N = l.micro_batch * m.seq_len;
  mem.workspace = 2 * N * m.ffn_dim() / l.tp * (megatron ? 2 : kFloat) + kGemmWorkspace;
  return mem;
}

PlannedMemory plan_memory(const ModelConfig& m, const PlanLayout& l, const Schedule& s) {
  PlannedMemory heaviest;
  for (int stage = 0; stage < l.pp; ++stage) {
    const PlannedMemory mem = stage_memory(m, l, s, stage);
    if (mem.total() > heaviest.total()) heaviest = mem;
  }
  return heaviest;
}

}  // namespace gpt
