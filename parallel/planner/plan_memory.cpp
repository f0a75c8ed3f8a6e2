// The planner's memory adapter (see plan_memory.h). This project's regimes are the memory model's
// prediction (parallel/memory_model.h) for the CUDA backend, whose fused attention keeps the
// softmax's row statistics instead of the T x T probabilities, the distributed optimizer's
// sharded state and padding included (bucket_plan.h). Megatron's regime is
// priced from Korthikanti et al. 2022's per-block activation formulas (the memory model's
// korthikanti_layer_activation_bytes) and Megatron's 18 bytes per parameter.
#include "parallel/planner/plan_memory.h"

#include <algorithm>

#include "parallel/memory_model.h"

namespace gpt {
namespace {

constexpr int64_t kFloat = 4;
// cuBLASLt's workspace the CUDA backend allocates (framework/cuda), per rank.
constexpr int64_t kGemmWorkspace = 32 << 20;

bool is_last(const PlanLayout& l, int stage) {
  return stage == l.pp - 1;
}

int64_t head_cache_bytes(const ModelConfig& m, const PlanLayout& l) {
  const int64_t N = l.micro_batch * m.seq_len;
  // ln_f output (all rows), the logits shard in fp32 and four row statistics.
  const int64_t floats = N * m.d_model + N * m.padded_vocab(l.tp) / l.tp + 4 * N;
  return floats * kFloat;
}

// Megatron's activations on stage `stage` at its peak: its caches in flight (the schedule's
// count), each one chunk's blocks (Korthikanti et al.'s bytes; the fully recomputed ones keep
// their input; with uneven chunks on one stage, its largest), one rebuilt block where blocks are
// recomputed, and the head's logits.
int64_t megatron_activation_bytes(const ModelConfig& m, const PlanLayout& l, const Schedule& s,
                                  int stage) {
  int64_t per_chunk = 0;
  for (int chunk = 0; chunk < l.virtual_stages; ++chunk)
    per_chunk = std::max(per_chunk, l.chunk_layers(m, stage, chunk));
  const int64_t recomputed = l.recomputed_layers(per_chunk);
  const Recompute kept_mode = l.recompute == Recompute::kFull ? Recompute::kNone : l.recompute;
  const double kept =
      korthikanti_layer_activation_bytes(m, l.micro_batch, l.tp, l.sequence_parallel, kept_mode);
  const double input = korthikanti_layer_activation_bytes(m, l.micro_batch, l.tp,
                                                          l.sequence_parallel, Recompute::kFull);
  const double chunk =
      static_cast<double>(per_chunk - recomputed) * kept + static_cast<double>(recomputed) * input;
  double bytes = s.stated_caches[static_cast<size_t>(stage)] * chunk + (recomputed > 0 ? kept : 0);
  if (is_last(l, stage))
    bytes +=
        s.stated_b_caches[static_cast<size_t>(stage)] * static_cast<double>(head_cache_bytes(m, l));
  return static_cast<int64_t>(bytes);
}

// This project's prediction, from the memory model, for one rank of `stage`.
PlannedMemory project_memory(const ModelConfig& m, const PlanLayout& l, const Schedule& s,
                             int stage, DeviceKind device) {
  MemoryModelInput in;
  in.model = m;
  in.layout = l;
  in.microbatches = l.microbatches;
  in.device = device;
  // The optimizer state is sharded by the model under ZeRO-1.
  return {predict_memory(in, stage * l.tp * l.dp, s)};
}

}  // namespace

int64_t stage_parameters(const ModelConfig& m, const PlanLayout& l, int stage) {
  int64_t n = 0;
  for (int chunk = 0; chunk < l.virtual_stages; ++chunk)
    n += chunk_parameter_floats(
        m, l.tp, virtual_stage_spec(m, l.pp, l.virtual_stages, stage, chunk, l.pipeline_layers));
  return n;
}

PlannedMemory stage_memory(const ModelConfig& m, const PlanLayout& l, const Schedule& s, int stage,
                           DeviceKind device) {
  if (l.precision != PrecisionRegime::kMegatronMixed) return project_memory(m, l, s, stage, device);
  const int64_t params = stage_parameters(m, l, stage);
  const int64_t shards = l.distributed_optimizer ? l.dp : 1;
  MemoryBytes b;
  // 16-bit weights, fp32 main gradients, fp32 master weights plus Adam's two moments.
  b[MemoryCategory::kWeights] = params * 2;
  b[MemoryCategory::kGrads] = params * kFloat;
  b[MemoryCategory::kOptimizer] = params * 3 * kFloat / shards;
  b[MemoryCategory::kActivations] = megatron_activation_bytes(m, l, s, stage);
  // Point-to-point buffers: an activation and a gradient to send and to receive.
  const int64_t rows = l.micro_batch * m.seq_len / (l.sequence_parallel ? l.tp : 1);
  b[MemoryCategory::kComm] = l.pp > 1 ? 4 * rows * m.d_model * 2 : 0;
  // Scratch: the widest layer temporaries (two (N, 4C/tp) buffers) and the GEMM workspace.
  const int64_t N = l.micro_batch * m.seq_len;
  b[MemoryCategory::kWorkspace] = 2 * N * m.ffn_dim() / l.tp * 2 + kGemmWorkspace;
  return {b};
}

PlannedMemory plan_memory(const ModelConfig& m, const PlanLayout& l, const Schedule& s,
                          DeviceKind device) {
  PlannedMemory heaviest;
  for (int stage = 0; stage < l.pp; ++stage) {
    const PlannedMemory mem = stage_memory(m, l, s, stage, device);
    if (mem.total() > heaviest.total()) heaviest = mem;
  }
  return heaviest;
}

}  // namespace gpt
