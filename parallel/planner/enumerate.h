// The planner's search space: every layout `train` could run for a model, a global batch and a
// job on a cluster. Each layout option is either fixed (the user gave it) or enumerated over its
// valid values; a layout is kept when Layout::validate_step and the cluster's placement rules
// accept it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "framework/config.h"
#include "parallel/layout.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

struct LayoutSearch {
  ModelConfig model;
  int64_t global_batch_size = 64;
  int world = 1;  // ranks of the job
  int nodes = 1;  // nodes of the job, as --nodes names them in messages
  RankPlacement placement;
  bool allow_tp_across_nodes = false;
  Layout fixed;  // the values of the fixed options
  // train's names of the layout options that are fixed ("tp", "schedule", ...); the others are
  // enumerated. A fixed precision of nullopt ("auto") is enumerated too.
  std::set<std::string> fixed_options;
};

// Every layout of the search on `cluster`; a one-line input error naming the fixed option that
// rules them all out (e.g. "--tp 3 does not divide --n-head 8").
std::vector<PlanLayout> enumerate_layouts(const LayoutSearch& search, const Cluster& cluster);

}  // namespace gpt
