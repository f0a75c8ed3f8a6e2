// plan's options (docs/PLANNER.md): the model with train's option names plus --vocab-size and
// --global-batch-size, the cluster (--cluster FILE|PRESET, --nodes), the calibrations, and
// train's layout options, parsed into a Layout by train's typed parsers: each one given is fixed
// and each one left out is enumerated (parallel/planner/enumerate.h).
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "framework/config.h"
#include "parallel/layout.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/enumerate.h"
#include "parallel/planner/ranking.h"
#include "parallel/planner/serving_model.h"

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
  // Layout options, parsed by train's typed parsers; the ones not in `given` are enumerated.
  Layout layout;
  // --pipeline-layers as given: empty (both even and auto), even, auto, or counts (into layout).
  std::string pipeline_layers;
  PipelineSplits splits = PipelineSplits::kEvenAndBalanced;
  bool allow_tp_across_nodes = false;
  // --serve: price serving instead of training (parallel/planner/serving_model.h).
  bool serve = false;
  int64_t prompt_tokens = 512, output_tokens = 128;
  std::string concurrency_text = "1,4,16,64";
  std::vector<int64_t> concurrency;  // concurrency_text parsed
  double bytes_per_weight = 4;
  // --memory-headroom GB: what each rank needs beside the predicted buffers (Cluster's
  // memory_headroom_bytes); a layout fits within the GPU's memory less it.
  double memory_headroom_gb = 0;
  bool json = false;
  int top = 10;

  std::set<std::string> given;
  bool was_given(const std::string& name) const { return given.count(name) > 0; }
};

boost::program_options::options_description plan_options_description(PlanOptions& options);

// Applies --model's preset to the shape options not given and checks every option alone
// (ranges, names); throws a one-line input error naming the option.
void finish_plan_options(PlanOptions& options);

// Sets the cluster's memory headroom from --memory-headroom; an input error when it is not below
// the GPU's memory.
void apply_memory_headroom(const PlanOptions& options, Cluster& cluster);

// The job's ranks: --ranks, or every GPU of --nodes; an input error when --ranks exceeds them.
int job_ranks(const PlanOptions& options, const Cluster& cluster);

// The layouts plan --serve prices for these options on `cluster` (serving_layouts).
std::vector<PlanLayout> serving_layout_search(const PlanOptions& options, const Cluster& cluster);

// What the planner enumerates for these options on `cluster` (parallel/planner/enumerate.h).
LayoutSearch layout_search(const PlanOptions& options, const Cluster& cluster);

}  // namespace gpt
