// plan's results: each layout priced (memory of its heaviest rank, predicted step), ranked
// (layouts that fit the GPU's memory first, then by step time), printed as a table or as one
// JSON object per layout, and the line that says which term made the best layout beat the
// runner-up.
#pragma once

#include <functional>

#include <string>
#include <vector>

#include "framework/json.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/plan_memory.h"

namespace gpt {

struct PricedLayout {
  PlanLayout layout;
  PlannedMemory memory;
  StepPrediction step;
  bool fits = false;
};

// Which pipeline splits plan prices (--pipeline-layers): each layout as enumerated (even, or the
// counts given); each pipeline layout at its balanced split instead (auto); or both, the balanced
// split added beside the even one where it differs. Either way a layout is balanced only where
// that could beat the best step that fits priced so far (its balanced_step_bound is below it; on
// a CPU cluster always), best even layouts first, and not where it needs twice the GPU's memory
// at even; the others stay at even.
enum class PipelineSplits { kGiven, kBalanced, kEvenAndBalanced };

// Prices every layout and sorts them best first; `progress` (when set) is called after each
// layout with the count priced and the total.
std::vector<PricedLayout> price_layouts(
    const ModelConfig& model, const std::vector<PlanLayout>& layouts, const Cluster& cluster,
    const std::function<void(size_t done, size_t total)>& progress = {},
    PipelineSplits splits = PipelineSplits::kGiven);

// The object `plan --json` prints for one layout.
Json layout_json(const PricedLayout& p);

// The memory a layout must fit: "80 GB of a H100-SXM5-80GB", or with a headroom "72 GB usable of
// a H100-SXM5-80GB (80 GB less 8 GB of --memory-headroom)".
std::string usable_memory_text(const Cluster& cluster);

// Why the first of `ranked` beat the second: one or two lines (empty with one layout).
std::string why_best(const std::vector<PricedLayout>& ranked, const Cluster& cluster);

// The ranked table's first `rows` rows, with a header naming the cluster and model.
std::string ranked_table(const std::vector<PricedLayout>& ranked, int rows);

}  // namespace gpt
