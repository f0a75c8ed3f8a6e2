// One layout the planner prices: the grid, the schedule, the micro-batch, the memory-saving
// options (recomputation, sequence parallelism, the distributed optimizer) and the precision
// regime, with their names as `plan` prints them. The regimes: this project's fp32 and bf16
// (bf16 matrix-product operands; activations, gradients, master weights and optimizer state in
// fp32), and megatron-mixed, the regime of Megatron-LM's published runs (16-bit weights,
// activations and gradients, fp32 master weights and Adam state), which `train` does not run.
#pragma once

#include <cstdint>
#include <string>

#include "framework/config.h"
#include "parallel/cluster.h"
#include "parallel/memory_model.h"
#include "parallel/pipeline_schedule.h"

namespace gpt {

// Recompute (parallel/memory_model.h), as Korthikanti et al. 2022 and the planner read it:
// selective recomputes the attention core (QK^T, softmax, its dropout, the product with V) in the
// backward; full keeps only each block's input and re-runs the block's forward before its
// backward.
enum class PrecisionRegime { kFp32, kBf16, kMegatronMixed };
const char* regime_name(PrecisionRegime p);
// One line saying what the regime keeps in which precision, for the output.
const char* regime_description(PrecisionRegime p);

struct PlanLayout {
  int tp = 1, pp = 1, dp = 1;
  ScheduleKind schedule = ScheduleKind::k1f1b;
  int virtual_stages = 1;
  int64_t micro_batch = 1;
  int microbatches = 1;  // global batch / (dp * micro_batch)
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int recompute_layers = 0;  // full: the first N blocks of each chunk (train's); 0 = all
  bool distributed_optimizer = false;
  PrecisionRegime precision = PrecisionRegime::kBf16;
  RankPlacement placement;  // plan's --map-by and --nodes

  int world() const { return tp * pp * dp; }
  int64_t layers_per_chunk(const ModelConfig& m) const {
    return m.n_layer / (static_cast<int64_t>(pp) * virtual_stages);
  }
  // Blocks of one model chunk whose forward is rerun before their backward (full
  // recomputation), as train's --recompute-layers counts them.
  int64_t recomputed_layers_per_chunk(const ModelConfig& m) const;
};

// "tp 4 pp 4 dp 1 1f1b mb 1 sp full" and the like, for messages.
std::string describe(const PlanLayout& layout);

}  // namespace gpt
