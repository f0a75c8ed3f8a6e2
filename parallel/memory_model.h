// The memory model: what every rank allocates, per category (framework/memory_ledger.h), as a
// pure function of the model shape, the layout, the schedule, the micro-batch size, the
// recomputation mode, the optimizer, the precision and the backend kind. The layers size their
// buffers with LayerSizes below and the model sums the same sizes, each block rounded as the
// backend reserves it, so on the CPU backend the prediction equals the ledger to the byte (the
// memory tests prove it for every layout they run). `train` checks it against --memory-limit-gb
// and prints it; `plan` ranks layouts by it. docs/MEMORY.md explains each term.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/backend.h"
#include "framework/config.h"
#include "framework/memory_ledger.h"
#include "parallel/bucket_plan.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_grid.h"
#include "parallel/stage_layout.h"

namespace gpt {

// Activation recomputation (Korthikanti et al. 2022): kSelective drops what is quadratic in the
// sequence length inside attention (the CPU backend's softmax probabilities) and rebuilds it in
// the backward from the kept q, k, v; kFull keeps only each block's input and re-runs the block's
// forward before its backward.
enum class Recompute { kNone, kSelective, kFull };
const char* recompute_name(Recompute mode);  // "none", "selective", "full"
// Throws a one-line gpt::Error naming --recompute for anything else.
Recompute parse_recompute(const std::string& name);

// How one model chunk recomputes: the mode, how many of its blocks (the first ones) a full
// recomputation covers, and whether its schedule runs B-input and W apart (ZB-H1), which keeps a
// rebuilt cache per block until its W.
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
  bool sequence_parallel = false;
  DeviceKind device = DeviceKind::kCpu;
  bool drop_attention_cache = false;  // selective recomputation of a quadratic attention cache

  int64_t residual() const { return Nl * C; }  // block inputs and outputs, x1, their gradients
  int64_t ln_stats() const { return Nl; }      // a LayerNorm's mean, or its rstd
  // A LayerNorm's output as the next linear reads it (all N rows); with sequence parallelism the
  // linear's all-gathered copy is kept instead (gathered_rows), and this is empty.
  int64_t ln_out() const { return sequence_parallel ? 0 : N * C; }
  int64_t gathered_rows() const { return sequence_parallel ? N * C : 0; }
  int64_t qkv() const { return 3 * N * local_channels; }
  int64_t attention_out() const { return N * local_channels; }
  int64_t attention_cache() const {  // what attention_forward keeps for the backward
    return drop_attention_cache ? 0 : attention_cache_floats(device, B, local_heads, T);
  }
  int64_t attention_rebuilt() const {  // selective: where the backward rebuilds it
    return drop_attention_cache ? attention_cache_floats(device, B, local_heads, T) : 0;
  }
  int64_t attention_scratch() const { return attention_scratch_floats(device, B, local_heads, T); }
  int64_t ffn() const { return N * local_ffn; }
  int64_t head_rows() const { return N * C; }  // ln_f's output, all N rows
  int64_t logits() const { return N * local_vocab; }
  int64_t row_stat() const { return N; }  // a per-token loss statistic
  int64_t tokens() const { return N; }    // int32 tokens or targets of a microbatch
  int64_t partial() const { return sequence_parallel ? N * C : 0; }
  int64_t ln_local() const { return sequence_parallel ? Nl * C : 0; }
};

LayerSizes layer_sizes(const ModelConfig& model, int tp, bool sequence_parallel,
                       int64_t micro_batch, DeviceKind device, Recompute recompute);

// Everything a rank's memory depends on.
struct MemoryModelInput {
  ModelConfig model;
  GridShape grid;
  ScheduleKind schedule = ScheduleKind::k1f1b;
  int virtual_stages = 1;
  int microbatches = 1;  // per optimizer step on each dp rank
  int64_t micro_batch = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int64_t recompute_layers = 0;  // full: the first N blocks of each chunk; 0 = all
  std::vector<int64_t> layers_per_stage;
  int optimizer_states = 2;  // float states per parameter: AdamW 2, SGD 1
  // --distributed-optimizer and --dp-bucket-size: at dp > 1 the buckets are padded and the
  // optimizer state (and a reduced-gradient shard, comm) is 1/dp of them (bucket_plan.h).
  bool distributed_optimizer = false;
  int64_t dp_bucket_elements = kDefaultBucketElements;
  DeviceKind device = DeviceKind::kCpu;
};

// Bytes of a buffer of `count` elements of `element_bytes` as `device` reserves it.
int64_t reserved_bytes(DeviceKind device, int64_t count, int64_t element_bytes = 4);

// How the chunk `spec` recomputes under --recompute and --recompute-layers (0 = every block).
ChunkRecompute chunk_recompute(Recompute mode, int64_t recompute_layers, const StageSpec& spec,
                               bool split_backward);
// Floats of the parameters chunk `spec` registers on one tp rank.
int64_t chunk_parameter_floats(const ModelConfig& model, int tp, const StageSpec& spec);
// Those parameters, in the order the chunk registers them (layers/gpt_stage.cpp): what the dp
// bucket plan groups and pads.
std::vector<BucketParameter> chunk_parameters(const ModelConfig& model, int tp,
                                              const StageSpec& spec);

// The predicted bytes of every category at the rank's peak (everything is allocated at set-up,
// so each category's peak is what it holds). Throws a one-line gpt::Error for settings the
// schedule refuses.
MemoryBytes predict_memory(const MemoryModelInput& in, int rank);

// One rank's prediction with where it sits.
struct RankMemory {
  int rank = 0;
  GridCoordinates coordinates;
  MemoryBytes bytes;
};
// Every rank's prediction, in rank order (ranks of one stage predict alike; computed per stage).
std::vector<RankMemory> predict_all_ranks(const MemoryModelInput& in);
// The rank with the largest total (the lowest such rank), and the heaviest rank of each stage.
RankMemory heaviest_rank(const std::vector<RankMemory>& ranks);
std::vector<RankMemory> heaviest_per_stage(const std::vector<RankMemory>& ranks, int pp);

// Korthikanti et al.'s activation bytes per layer per microbatch for 16-bit activations
// (s*b*h*(34 + 5*a*s/h) without recomputation, s*b*h*(34/t + 5*a*s/(h*t)) with tp, and the
// selective and full variants), for comparing with this project's fp32 caches (docs/MEMORY.md).
double korthikanti_layer_activation_bytes(const ModelConfig& model, int64_t micro_batch, int tp,
                                          bool sequence_parallel, Recompute recompute);

}  // namespace gpt
