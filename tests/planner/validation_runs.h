// The published runs the planner is validated against: Korthikanti et al. 2022, "Reducing
// Activation Recomputation in Large Transformer Models" (arXiv:2205.05198), Table 5: iteration
// times on A100 80GB (Selene, DGX A100 nodes) of GPT models with sequence 2048 and vocabulary
// 51200, in Megatron-LM's mixed precision; model shapes and layouts from their Table 3.
#pragma once

#include <vector>

#include "framework/config.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

struct PublishedRun {
  const char* name;
  ModelConfig model;
  int tp, pp, virtual_stages, global_batch;
  double full_recompute_s;      // "full recompute" row
  double sequence_selective_s;  // "sequence parallelism + selective recompute" row
};

inline std::vector<PublishedRun> korthikanti_table5() {
  // ModelConfig: n_layer, n_head, d_model, seq_len, vocab_size.
  return {
      {"22B", {48, 64, 6144, 2048, 51200}, 8, 1, 1, 4, 1.42, 1.10},
      {"175B", {96, 96, 12288, 2048, 51200}, 8, 8, 3, 64, 18.13, 13.75},
      {"530B", {105, 128, 20480, 2048, 51200}, 8, 35, 3, 280, 49.05, 37.83},
      {"1T", {128, 160, 25600, 2048, 51200}, 8, 64, 1, 512, 94.42, 71.49},
  };
}

// The layout of `run` as they trained it: micro-batch 1 (4 for the 22B model, whose batch is
// one microbatch), dp 1, interleaved 1F1B where virtual stages are above 1; full recomputation
// of every block, or sequence parallelism with selective recomputation.
inline PlanLayout published_layout(const PublishedRun& run, bool sequence_selective) {
  PlanLayout l;
  l.tp = run.tp;
  l.pp = run.pp;
  l.dp = 1;
  l.virtual_stages = run.virtual_stages;
  l.schedule = run.virtual_stages > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1f1b;
  l.micro_batch = run.pp == 1 ? run.global_batch : 1;
  l.microbatches = static_cast<int>(run.global_batch / l.micro_batch);
  l.sequence_parallel = sequence_selective;
  l.recompute = sequence_selective ? Recompute::kSelective : Recompute::kFull;
  l.precision = PrecisionRegime::kMegatronMixed;
  return l;
}

}  // namespace gpt
