// The published runs' tables and their check (published_runs.h). Every figure below is the
// source's; the layouts the sources leave out are stated where they are taken.
#include "parallel/planner/published_runs.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "parallel/planner/cluster.h"

namespace gpt {
namespace {

ModelConfig gpt(int64_t layers, int64_t heads, int64_t hidden) {
  return {layers, heads, hidden, 2048, 51200};
}

PlanLayout megatron_layout(int tp, int pp, int virtual_stages, int dp, int micro_batch,
                           int global_batch, Recompute recompute, bool sequence_parallel,
                           const FrameworkProfile& framework) {
  PlanLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.virtual_stages = virtual_stages;
  l.schedule = virtual_stages > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1f1b;
  l.micro_batch = micro_batch;
  l.microbatches = global_batch / (dp * micro_batch);
  l.sequence_parallel = sequence_parallel;
  l.recompute = recompute;
  l.precision = PrecisionRegime::kMegatronMixed;
  l.framework = framework;
  return l;
}

// Narayanan et al. 2021, equation 3: the FLOPs of one iteration with every block recomputed,
// 96 B s l h^2 (1 + s / 6h + V / 16 l h).
double narayanan_flops(const ModelConfig& m, double global_batch) {
  const double s = static_cast<double>(m.seq_len), l = static_cast<double>(m.n_layer),
               h = static_cast<double>(m.d_model), V = static_cast<double>(m.vocab_size);
  return 96 * global_batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

}  // namespace

std::vector<PublishedRun> korthikanti_table5() {
  // Micro-batch 1, dp 1; the 22B model's batch of 4 is its one microbatch.
  struct Row {
    const char* name;
    ModelConfig model;
    int tp, pp, v, global_batch;
    double full_s, sequence_selective_s;
  };
  const Row rows[] = {
      {"22B", gpt(48, 64, 6144), 8, 1, 1, 4, 1.42, 1.10},
      {"175B", gpt(96, 96, 12288), 8, 8, 3, 64, 18.13, 13.75},
      {"530B", gpt(105, 128, 20480), 8, 35, 3, 280, 49.05, 37.83},
      {"1T", gpt(128, 160, 25600), 8, 64, 1, 512, 94.42, 71.49},
  };
  std::vector<PublishedRun> runs;
  for (const Row& r : rows) {
    for (const bool sp : {false, true}) {
      const int micro_batch = r.pp == 1 ? r.global_batch : 1;
      runs.push_back({"Korthikanti 2022, Table 5",
                      std::string(r.name) + (sp ? " sp+selective" : " full"), r.model,
                      megatron_layout(r.tp, r.pp, r.v, 1, micro_batch, r.global_batch,
                                      sp ? Recompute::kSelective : Recompute::kFull, sp,
                                      FrameworkProfile::megatron_2022()),
                      sp ? r.sequence_selective_s : r.full_s});
    }
  }
  return runs;
}

std::vector<PublishedRun> narayanan_table1() {
  // Layouts from Megatron-LM's examples/sc21/run_table_1.sh: micro-batch, the layers of a
  // virtual stage (0: not interleaved), and --DDP-impl (torch or local).
  struct Row {
    const char* name;
    ModelConfig model;
    int tp, pp, layers_per_virtual_stage, gpus, micro_batch, global_batch;
    bool torch_ddp;
    double tflops_per_gpu;
  };
  const Row rows[] = {
      {"1.7B", gpt(24, 24, 2304), 1, 1, 0, 32, 16, 512, true, 137},
      {"3.6B", gpt(30, 32, 3072), 2, 1, 0, 64, 16, 512, true, 138},
      {"7.5B", gpt(36, 32, 4096), 4, 1, 0, 128, 16, 512, true, 142},
      {"18.4B", gpt(40, 48, 6144), 8, 1, 0, 256, 8, 1024, true, 135},
      {"39.1B", gpt(48, 64, 8192), 8, 2, 0, 512, 4, 1536, false, 138},
      {"76.1B", gpt(60, 80, 10240), 8, 4, 5, 1024, 2, 1792, false, 140},
      {"145.6B", gpt(80, 96, 12288), 8, 8, 5, 1536, 2, 2304, false, 148},
      {"310.1B", gpt(96, 128, 16384), 8, 16, 3, 1920, 1, 2160, false, 155},
      {"529.6B", gpt(105, 128, 20480), 8, 35, 1, 2520, 1, 2520, false, 163},
      {"1008.0B", gpt(128, 160, 25600), 8, 64, 0, 3072, 1, 3072, false, 163},
  };
  std::vector<PublishedRun> runs;
  for (const Row& r : rows) {
    const int dp = r.gpus / (r.tp * r.pp);
    const int per_stage = static_cast<int>(r.model.n_layer) / r.pp;
    const int v = r.layers_per_virtual_stage > 0 ? per_stage / r.layers_per_virtual_stage : 1;
    const double seconds =
        narayanan_flops(r.model, r.global_batch) / (r.tflops_per_gpu * kTFLOPS * r.gpus);
    runs.push_back(
        {"Narayanan 2021, Table 1", r.name, r.model,
         megatron_layout(r.tp, r.pp, v, dp, r.micro_batch, r.global_batch, Recompute::kFull, false,
                         FrameworkProfile::megatron_2021(r.torch_ddp)),
         seconds});
  }
  return runs;
}

std::vector<PublishedRun> mtnlg_system_performance() {
  // tp 8, pp 35 on 8-GPU nodes: dp is the nodes over 35. Micro-batch 1 (not published).
  std::vector<PublishedRun> runs;
  for (const auto& [nodes, seconds] : {std::pair{280, 60.1}, {350, 50.2}, {420, 44.4}}) {
    runs.push_back({"Smith 2022 (MT-NLG), DeepSpeed", "530B on " + std::to_string(nodes) + " nodes",
                    gpt(105, 128, 20480),
                    megatron_layout(8, 35, 1, nodes / 35, 1, 1920, Recompute::kFull, false,
                                    FrameworkProfile::deepspeed_pipeline_2021()),
                    seconds});
  }
  return runs;
}

std::vector<PublishedRun> megatron_readme_gpt3() {
  // examples/pretrain_gpt3_175B.sh of the same code (PyTorch container 20.12): tp 8, pp 16 on
  // 1024 GPUs, micro-batch 1, global batch 1536, fp16, every block recomputed, local DDP.
  return {{"Megatron-LM README 2021 (held out)", "175B GPT-3 example", gpt(96, 96, 12288),
           megatron_layout(8, 16, 1, 8, 1, 1536, Recompute::kFull, false,
                           FrameworkProfile::megatron_2021(false)),
           32.0}};
}

std::vector<PublishedRun> published_runs() {
  std::vector<PublishedRun> all;
  for (const auto& table :
       {korthikanti_table5, narayanan_table1, mtnlg_system_performance, megatron_readme_gpt3})
    for (PublishedRun& run : table()) all.push_back(std::move(run));
  return all;
}

std::vector<CheckedRun> check_published_runs() {
  const Cluster cluster = cluster_preset("dgx-a100");
  std::vector<CheckedRun> checked;
  for (PublishedRun& run : published_runs()) {
    const PlanLayout& l = run.layout;
    const Schedule schedule = make_schedule(l.schedule, l.pp, l.microbatches, l.virtual_stages);
    const StepPrediction p = predict_step(run.model, l, cluster, schedule);
    const double error = p.step_time_s / run.published_s - 1;
    checked.push_back({std::move(run), p, error});
  }
  return checked;
}

ValidationSummary summarize(const std::vector<CheckedRun>& runs) {
  ValidationSummary s;
  if (runs.empty()) return s;
  s.lowest_error = s.highest_error = runs.front().error;
  double sum = 0;
  for (const CheckedRun& r : runs) {
    sum += std::abs(r.error);
    if (std::abs(r.error) > std::abs(s.worst_error)) s.worst_error = r.error;
    s.lowest_error = std::min(s.lowest_error, r.error);
    s.highest_error = std::max(s.highest_error, r.error);
  }
  s.runs = static_cast<int>(runs.size());
  s.mean_abs_error = sum / s.runs;
  return s;
}

std::string validation_band_text(const ValidationSummary& s, bool megatron_rows, bool own_rows) {
  std::ostringstream band;
  band.setf(std::ios::fixed);
  band.precision(1);
  band << s.runs << " published A100 runs of Megatron-LM and DeepSpeed: mean |error| "
       << 100 * s.mean_abs_error << "%, worst " << std::showpos << 100 * s.worst_error << "%, from "
       << 100 * s.lowest_error << "% to " << 100 * s.highest_error << "%";
  std::string out;
  if (megatron_rows)
    out += "step times of the megatron-mixed rows (Megatron-LM's regime) checked against " +
           band.str() + " (docs/PLANNER.md)";
  if (own_rows)
    out += std::string(out.empty() ? "" : "\n") +
           "step times of the fp32 and bf16 rows: predictions for this project's own kernels on "
           "GPUs, not checked against measured GPU runs; the published-run check (Megatron's "
           "regime, " +
           band.str() + ") does not cover them (docs/PLANNER.md)";
  return out;
}

Json validation_band_json(const ValidationSummary& s) {
  Json j;
  j["regime"] = regime_name(PrecisionRegime::kMegatronMixed);
  j["published_runs"] = s.runs;
  j["mean_abs_error"] = s.mean_abs_error;
  j["worst_error"] = s.worst_error;
  j["lowest_error"] = s.lowest_error;
  j["highest_error"] = s.highest_error;
  return j;
}

}  // namespace gpt
