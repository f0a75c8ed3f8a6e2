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
#include "parallel/layer_sizes.h"
#include "parallel/layout.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_grid.h"
#include "parallel/stage_layout.h"

namespace gpt {

// Everything a rank's memory depends on.
struct MemoryModelInput {
  ModelConfig model;
  Layout layout;             // with dp set: the memory model does not know the job's size
  int microbatches = 1;      // per optimizer step on each dp rank
  int optimizer_states = 2;  // float states per parameter: AdamW 2, SGD 1
  // --dp-bucket-size: at dp > 1 under the distributed optimizer the buckets are padded and the
  // optimizer state (and a reduced-gradient shard, comm) is 1/dp of them (bucket_plan.h).
  int64_t dp_bucket_elements = kDefaultBucketElements;
  DeviceKind device = DeviceKind::kCpu;

  GridShape grid() const { return {layout.tp, layout.dp, layout.pp}; }
};

// Bytes of a buffer of `count` elements of `element_bytes` as `device` reserves it.
int64_t reserved_bytes(DeviceKind device, int64_t count, int64_t element_bytes = 4);

// Floats of the parameters chunk `spec` registers on one tp rank.
int64_t chunk_parameter_floats(const ModelConfig& model, int tp, const StageSpec& spec);
// Those parameters, in the order the chunk registers them (layers/model_stage.cpp): what the dp
// bucket plan groups and pads. named false leaves the blocks' names empty: the plan reads sizes
// only, and the planner asks for thousands of layouts.
std::vector<BucketParameter> chunk_parameters(const ModelConfig& model, int tp,
                                              const StageSpec& spec, bool named = true);

// The predicted bytes of every category at the rank's peak (everything is allocated at set-up,
// so each category's peak is what it holds). Throws a one-line gpt::Error for settings the
// schedule refuses. The second form takes the layout's schedule already made (the planner prices
// many layouts of one schedule; making and checking it is most of a prediction's time).
MemoryBytes predict_memory(const MemoryModelInput& in, int rank);
MemoryBytes predict_memory(const MemoryModelInput& in, int rank, const Schedule& schedule);

// The CUDA backend's per-call scratch on `rank` (framework/cuda_scratch.h): the largest request of
// each growing buffer over a training run, which the trainer reserves before the first step and
// predict_memory counts as workspace. All zero off CUDA. Ranks of one stage reserve alike (the
// optimizers' table takes the most blocks of any dp rank's segments).
DeviceScratch device_scratch(const MemoryModelInput& in, int rank);

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
// selective and full variants), for comparing with this project's fp32 caches (docs/MEMORY.md);
// the Llama family's by the same accounting of its own tensors (memory_model.cpp).
double korthikanti_layer_activation_bytes(const ModelConfig& model, int64_t micro_batch, int tp,
                                          bool sequence_parallel, Recompute recompute);

}  // namespace gpt
