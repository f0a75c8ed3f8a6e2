// The published training runs the planner is validated against (docs/PLANNER.md, "Validation
// against published runs"), each with its layout as published and the framework behaviour that
// run had (framework_profile.h), and the check that prices them all on the dgx-a100 preset: the
// test holds it to its bounds and `plan` prints its error band beside every prediction. Sources:
//  - Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
//    (arXiv:2205.05198), Table 5: iteration times on A100 80GB (Selene) of GPT models with
//    sequence 2048 and vocabulary 51200 in Megatron-LM's mixed precision; shapes and layouts
//    from their Table 3; micro-batch 1 (the 22B model: its batch of 4 as one microbatch), dp 1.
//  - Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
//    Megatron-LM" (SC21, arXiv:2104.04473), Table 1: achieved TFLOP/s per A100 of ten GPT models
//    (sequence 2048, vocabulary 51200); tp, pp, micro and global batch, virtual stages and the
//    data-parallel implementation from the script that reproduces the table (Megatron-LM,
//    examples/sc21/run_table_1.sh), every block recomputed. Times are the paper's FLOPs per
//    iteration (their equation 3) over the published rate.
//  - Smith et al. 2022, "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B"
//    (arXiv:2201.11990), the system-performance table: iteration times of MT-NLG 530B on 280,
//    350 and 420 DGX A100 nodes, tp 8 pp 35, global batch 1920, in DeepSpeed's pipeline engine.
//    The micro-batch is not published: 1 is taken, as in Megatron's own 530B runs.
//  - Megatron-LM's README (2021), "GPT-3 Example": 175B on 1024 A100s, "each iteration takes
//    around 32 seconds". Kept out of the model's development: priced once, after the rest.
#pragma once

#include <string>
#include <vector>

#include "framework/config.h"
#include "framework/json.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/framework_profile.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

struct PublishedRun {
  std::string source;  // short citation, one per table
  std::string name;
  ModelConfig model;
  PlanLayout layout;
  double published_s = 0;  // iteration time
};

// The tables, one per source, and all of them in the order the docs show them.
std::vector<PublishedRun> korthikanti_table5();
std::vector<PublishedRun> narayanan_table1();
std::vector<PublishedRun> mtnlg_system_performance();
std::vector<PublishedRun> megatron_readme_gpt3();
std::vector<PublishedRun> published_runs();

// One run priced on the dgx-a100 preset, and its error (predicted over published, less one).
struct CheckedRun {
  PublishedRun run;
  StepPrediction prediction;
  double error = 0;
};
std::vector<CheckedRun> check_published_runs();

// What a set of checked runs says: how many, the mean |error|, the error of largest magnitude,
// and the lowest and highest errors.
struct ValidationSummary {
  int runs = 0;
  double mean_abs_error = 0, worst_error = 0, lowest_error = 0, highest_error = 0;
};
ValidationSummary summarize(const std::vector<CheckedRun>& runs);

// The check applies to Megatron's regime (megatron-mixed), in which the runs are priced: the
// lines `plan` prints under its table, one for the rows of each kind of regime it shows (those
// in Megatron's, with the check's band; this project's fp32 and bf16, predictions for its own
// kernels, which the check does not cover), and the object its JSON carries (with the regime).
std::string validation_band_text(const ValidationSummary& s, bool megatron_rows, bool own_rows);
Json validation_band_json(const ValidationSummary& s);

}  // namespace gpt
