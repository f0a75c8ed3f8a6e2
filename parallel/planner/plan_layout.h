// One layout the planner prices: a Layout (parallel/layout.h) whose dp and precision are
// always set, with the step's microbatch count and where its ranks sit on the cluster.
#pragma once

#include "parallel/layout.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/framework_profile.h"

namespace gpt {

struct PlanLayout : Layout {
  PlanLayout() { dp = 1; }  // a single-rank layout until set: the planner never derives dp
  int microbatches = 1;     // global batch / (dp * micro_batch)
  RankPlacement placement;  // plan's --map-by and --nodes
  // How Megatron's regime runs the step (published runs of other framework versions).
  FrameworkProfile framework = FrameworkProfile::megatron_2022();

  int world() const { return tp * pp * dp; }
  // The regime the layout is priced in (the enumeration always sets it).
  PrecisionRegime regime() const { return precision.value_or(PrecisionRegime::kBf16); }
};

}  // namespace gpt
