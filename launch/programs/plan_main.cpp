// plan: predicts the memory and step time of every layout of a model on a described cluster by
// replaying the real pipeline schedules with per-action costs, and ranks them (docs/PLANNER.md).
// One process, no GPU: `plan --cluster dgx-h100 --nodes 4 --tp 4 --pp 4 --model gpt2`;
// `mpiexec -n 2 plan --calibrate FILE [model options]` measures this machine instead, and
// `mpiexec -n 16 plan --calibrate-turns FILE [model options]` adds what ranks taking turns on
// its cores pay each time two of them meet; `plan --serve --model gpt2 --cluster dgx-h100` prices
// serving instead: TTFT, TPOT and throughput of each tp x pp layout. Bad input (an unknown preset,
// a malformed cluster file, a layout that cannot divide the model) is one "error: ..." line and
// exit code 1.
#include <iostream>

#include "framework/timer.h"
#include "launch/calibration/calibrate.h"
#include "launch/calibration/calibrate_turns.h"
#include "launch/programs/plan_options.h"
#include "launch/programs/program.h"
#include "parallel/planner/published_runs.h"
#include "parallel/planner/ranking.h"
#include "parallel/planner/run_commands.h"
#include "parallel/planner/serving_report.h"

namespace {

// plan --serve: every served layout's prediction, as a table or one JSON object a line.
void print_serving(const gpt::PlanOptions& options, const gpt::Cluster& cluster,
                   const std::vector<gpt::PlanLayout>& layouts) {
  const gpt::ServingSetup base{options.model, {}, cluster, options.bytes_per_weight};
  const gpt::ServingRequest request{options.prompt_tokens, options.output_tokens};
  const auto served = gpt::price_serving(base, layouts, request, options.concurrency);
  if (options.json) {
    for (const auto& s : served) std::cout << gpt::serving_json(s).dump() << "\n";
    return;
  }
  std::cout << "serving on cluster " << cluster.name << ": " << options.nodes << " x "
            << cluster.gpus_per_node << " " << cluster.gpu.name << "; model "
            << options.model.n_layer << " layers, d_model " << options.model.d_model << ", "
            << options.model.n_head << " heads; " << options.bytes_per_weight
            << " bytes a weight; prompt " << options.prompt_tokens << ", output "
            << options.output_tokens << " tokens\n";
  std::cout << gpt::serving_table(served);
  std::cout << "TPOT: one request alone; tok/s@N: output tokens/s with N requests at once (* the "
               "cache holds fewer: at max seq)\n";
  std::cout << gpt::serving_best(served);
}

}  // namespace

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, [](int argc, char** argv) {
    gpt::PlanOptions options;
    gpt::Cluster cluster;
    std::vector<gpt::PlanLayout> layouts;
    const auto description = gpt::plan_options_description(options);
    const bool run = gpt::parse_options(
        MPI_COMM_WORLD, argc, argv,
        "plan: the predicted memory and step time of every layout on a cluster\n"
        "usage: plan --cluster FILE|PRESET --nodes N [model options] [layout options]\n"
        "       plan --serve --cluster FILE|PRESET [model options] [--tp N] [--pp N] [serving "
        "options]",
        description, &options.given, [&] {
          gpt::finish_plan_options(options);
          if (!options.calibrate.empty() || !options.calibrate_turns.empty()) return;
          cluster = gpt::load_cluster(options.cluster);
          gpt::apply_memory_headroom(options, cluster);
          if (options.serve) {
            layouts = gpt::serving_layout_search(options, cluster);
            return;
          }
          layouts = gpt::enumerate_layouts(gpt::layout_search(options, cluster), cluster);
        });
    if (run && !options.calibrate.empty()) {
      gpt::calibrate_cpu_cluster(MPI_COMM_WORLD, options.model, options.calibrate_seconds,
                                 options.calibrate);
      return 0;
    }
    if (run && !options.calibrate_turns.empty()) {
      gpt::calibrate_turns(MPI_COMM_WORLD, options.model, options.calibrate_seconds,
                           options.calibrate_turns);
      return 0;
    }
    if (!run || gpt::comm_rank(MPI_COMM_WORLD) != 0) return 0;
    if (options.serve) {
      print_serving(options, cluster, layouts);
      return 0;
    }
    // Searches of more than a few seconds say how far they are, on stderr.
    const double start = gpt::now_seconds();
    double last_report = start;
    const auto ranked = gpt::price_layouts(
        options.model, layouts, cluster,
        [&](size_t done, size_t total) {
          const double now = gpt::now_seconds();
          if (now - start < 3.0 || (now - last_report < 2.0 && done < total)) return;
          last_report = now;
          std::cerr << "plan: priced " << done << " of " << total << " layouts ("
                    << static_cast<int>(now - start) << " s)" << std::endl;
        },
        options.splits);
    const auto commands = [&](const gpt::PricedLayout& p) {
      return gpt::run_commands(p.layout, options.model, options.global_batch_size, cluster);
    };
    // On GPU clusters every prediction carries the error band of the published-run check; a
    // calibrated CPU cluster is checked by its own benchmark (docs/BENCHMARKS.md).
    const bool gpu_cluster = !cluster.cpu.active();
    const gpt::ValidationSummary validation =
        gpu_cluster ? gpt::summarize(gpt::check_published_runs()) : gpt::ValidationSummary{};
    if (options.json) {
      for (const auto& p : ranked) {
        gpt::Json j = gpt::layout_json(p);
        if (gpu_cluster) {
          j["step_time_validation"] = gpt::validation_band_json(validation);
          // The check covers Megatron's regime only: this project's rows are predictions.
          j["step_time_validated"] = p.layout.regime() == gpt::PrecisionRegime::kMegatronMixed;
        }
        const gpt::RunCommands run_p = commands(p);
        j["commands"] = {{"mpirun", run_p.mpirun}, {"sbatch", run_p.sbatch}};
        std::cout << j.dump() << "\n";
      }
      return 0;
    }
    std::cout << "cluster " << cluster.name << ": " << options.nodes << " x "
              << cluster.gpus_per_node << " " << cluster.gpu.name << "; model "
              << options.model.n_layer << " layers, d_model " << options.model.d_model << ", "
              << options.model.n_head << " heads, seq " << options.model.seq_len << ", vocab "
              << options.model.vocab_size << "; global batch " << options.global_batch_size << "; "
              << ranked.size() << " layouts\n";
    std::cout << gpt::ranked_table(ranked, options.top);
    if (gpu_cluster) {
      bool megatron_rows = false, own_rows = false;
      for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(options.top); ++i)
        (ranked[i].layout.regime() == gpt::PrecisionRegime::kMegatronMixed ? megatron_rows
                                                                           : own_rows) = true;
      std::cout << gpt::validation_band_text(validation, megatron_rows, own_rows) << "\n";
    }
    const gpt::PrecisionRegime best = ranked.front().layout.regime();
    std::cout << "precision " << gpt::regime_name(best) << ": " << gpt::regime_description(best)
              << "\n";
    std::cout << gpt::why_best(ranked, cluster) << "\n";
    const gpt::RunCommands best_run = commands(ranked.front());
    std::cout << "run the best (add --data and the run's own options):\n  " << best_run.mpirun
              << "\n  " << best_run.sbatch << "\n";
    return 0;
  });
}
