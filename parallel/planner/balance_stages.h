// --pipeline-layers auto (docs/PLANNER.md, "Balanced stages"): the split of the blocks over the
// pipeline's virtual stages that minimises the replayed step time (cost_model.h) among those
// whose heaviest stage fits the memory limit (plan_memory.h), with the embedding, the head, its
// logits and the loss priced on their stages. The same pure computation on every rank: train
// resolves `auto` with it, plan prices it beside the even split.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/memory_ledger.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/plan_memory.h"

namespace gpt {

// One split's price: the predicted step and the heaviest stage's memory, and whether that fits.
struct SplitPrice {
  std::vector<int64_t> counts;  // blocks per virtual stage (chunk * pp + stage), pp x v
  StepPrediction step;
  PlannedMemory memory;  // the heaviest stage's
  bool fits = true;
};

// What the search needs besides the model and the layout.
struct SplitSearch {
  const Cluster& cluster;
  const Schedule& schedule;       // the layout's
  double memory_limit_bytes = 0;  // 0: no limit
  DeviceKind device = DeviceKind::kCuda;
};

// `layout` priced at `counts` (its own pipeline_layers are replaced).
SplitPrice price_split(const ModelConfig& model, const PlanLayout& layout,
                       const SplitSearch& search, const std::vector<int64_t>& counts);

// The order auto ranks splits by: those that fit first, then the shorter step (times within a
// relative 1e-9 are equal: sums of the same costs in another order), the smaller heaviest stage,
// and finally the counts in lexicographic order, so the choice is one split, not one of a tie.
bool split_ranks_before(const SplitPrice& a, const SplitPrice& b);

// The counts of the even split (Layout's), for any --n-layer.
std::vector<int64_t> even_split(const ModelConfig& model, const PlanLayout& layout);

// Whether `counts` is a split --pipeline-layers accepts for `layout`: pp x v entries adding up
// to --n-layer, at least 1 each but for the chunks holding the embedding or the head.
bool valid_split(const ModelConfig& model, const PlanLayout& layout,
                 const std::vector<int64_t>& counts);

struct StageBalance {
  SplitPrice chosen;   // the best split found
  SplitPrice even;     // the even split, for the log and the table
  int64_t priced = 0;  // splits priced by the search
};

// The search: from the even split and from a water-filling of the blocks over the stages by their
// per-microbatch work (every block to the stage it lengthens least), a steepest descent moving one
// block between any two virtual stages at a time (up to 8 of them, or while (pp v)^3 x
// microbatches is at most 4 million; beyond, between neighbours along the model), each move
// priced by replaying the schedule, until no move ranks before the current split. At pp 1 the
// one split.
StageBalance balance_stages(const ModelConfig& model, const PlanLayout& layout,
                            const SplitSearch& search);

// A bound no split of `layout` can beat: the step's work over all stages (every pass of every
// microbatch, at the even split's per-block costs) spread perfectly over pp, with no bubble and
// no communication. plan skips the search for layouts whose bound is above a step it has.
double balanced_step_bound(const ModelConfig& model, const PlanLayout& layout,
                           const Cluster& cluster);

}  // namespace gpt
