// plan's options (docs/PLANNER.md): the model with train's option names plus --vocab-size and
// --global-batch-size, the cluster (--cluster FILE|PRESET, --nodes), and train's layout options,
// each of which is fixed when given and enumerated over its valid values when left out. The
// enumeration yields every layout train could run on the cluster (and megatron-mixed only when
// --precision names it); an option given with a value no layout can take is a one-line error.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "framework/config.h"
#include "parallel/cluster.h"
#include "parallel/plan_layout.h"

namespace gpt {

struct PlanOptions {
  std::string model_preset;
  ModelConfig model{12, 12, 768, 1024, 50257};
  int64_t global_batch_size = 64;
  std::string cluster = "dgx-h100";
  int nodes = 1;
  int ranks = 0;                // --ranks: 0 (not given) = nodes * gpus_per_node
  std::string map_by = "slot";  // --map-by slot|node, as mpirun places the ranks
  std::string calibrate;        // --calibrate FILE: measure this machine, write FILE, exit
  double calibrate_seconds = 20;
  std::string calibrate_turns;  // --calibrate-turns FILE: add the cost of taking turns to FILE
  // Layout options; the ones not in `given` are enumerated.
  int tp = 1, pp = 1, dp = 0, virtual_stages = 1, recompute_layers = 0;
  std::string schedule = "1f1b", recompute = "none", precision = "bf16";
  int64_t micro_batch_size = 1;
  bool sequence_parallel = false, distributed_optimizer = false, allow_tp_across_nodes = false;
  bool json = false;
  int top = 10;

  std::set<std::string> given;
  bool was_given(const std::string& name) const { return given.count(name) > 0; }
};

boost::program_options::options_description plan_options_description(PlanOptions& options);

// Applies --model's preset to the shape options not given and checks every option alone
// (ranges, names); throws a one-line input error naming the option.
void finish_plan_options(PlanOptions& options);

// The job's ranks: --ranks, or every GPU of --nodes; an input error when --ranks exceeds them.
int job_ranks(const PlanOptions& options, const Cluster& cluster);

// Every layout of the options on `cluster`; a one-line input error naming the fixed option
// that rules them all out (e.g. "--tp 3 does not divide --n-head 8").
std::vector<PlanLayout> enumerate_layouts(const PlanOptions& options, const Cluster& cluster);

}  // namespace gpt
