// Pricing, ranking and printing plan's layouts (see ranking.h).
#include "parallel/planner/ranking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "parallel/planner/balance_stages.h"

namespace gpt {
namespace {

// The schedule, its virtual stages and an uneven split: "interleaved v2 [1,3,3,1]".
std::string schedule_text(const PlanLayout& l) {
  std::string text = schedule_name(l.schedule);
  if (l.virtual_stages > 1) text += " v" + std::to_string(l.virtual_stages);
  if (!l.pipeline_layers.empty()) text += " [" + l.pipeline_layers_text() + "]";
  return text;
}

std::string recompute_text(const PlanLayout& l) {
  if (l.recompute != Recompute::kFull || l.recompute_layers == 0)
    return recompute_name(l.recompute);
  return GPT_MSG(recompute_name(l.recompute) << " " << l.recompute_layers);
}

// The terms of a step, named as the JSON names them.
struct Term {
  const char* name;
  double StepPrediction::*field;
};
constexpr Term kTerms[] = {{"compute", &StepPrediction::compute_s},
                           {"exposed tp communication", &StepPrediction::tp_comm_exposed_s},
                           {"exposed pp communication", &StepPrediction::pp_comm_exposed_s},
                           {"exposed dp communication", &StepPrediction::dp_comm_exposed_s},
                           {"pipeline bubble", &StepPrediction::bubble_s}};

}  // namespace

std::vector<PricedLayout> price_layouts(
    const ModelConfig& model, const std::vector<PlanLayout>& layouts, const Cluster& cluster,
    const std::function<void(size_t done, size_t total)>& progress, PipelineSplits splits) {
  std::vector<PricedLayout> priced;
  const DeviceKind device = cluster.cpu.active() ? DeviceKind::kCpu : DeviceKind::kCuda;
  // Layouts differing only in micro-batch size, memory savings or precision share a schedule;
  // making and checking one is O(pp * v * microbatches), most of a layout's price when made
  // for each.
  std::map<std::tuple<ScheduleKind, int, int, int>, Schedule> schedules;
  for (const PlanLayout& l : layouts) {
    const auto key = std::make_tuple(l.schedule, l.pp, l.microbatches, l.virtual_stages);
    auto found = schedules.find(key);
    if (found == schedules.end())
      found =
          schedules.emplace(key, make_schedule(l.schedule, l.pp, l.microbatches, l.virtual_stages))
              .first;
    const Schedule& schedule = found->second;
    PricedLayout p{l, plan_memory(model, l, schedule, device),
                   predict_step(model, l, cluster, schedule)};
    p.fits = static_cast<double>(p.memory.total()) <= cluster.usable_memory_bytes();
    priced.push_back(p);
    if (progress) progress(priced.size(), layouts.size());
  }
  const auto ranks_before = [](const PricedLayout& a, const PricedLayout& b) {
    if (a.fits != b.fits) return a.fits;
    return a.step.step_time_s < b.step.step_time_s;
  };
  std::stable_sort(priced.begin(), priced.end(), ranks_before);
  if (splits == PipelineSplits::kGiven) return priced;
  // The balanced splits, best even layouts first: each found lowers the step the others' bounds
  // must beat (while none fits, any step could win by fitting).
  double best_step = 0;
  for (const PricedLayout& p : priced)
    if (p.fits && (best_step == 0 || p.step.step_time_s < best_step))
      best_step = p.step.step_time_s;
  std::vector<PricedLayout> balanced;
  for (PricedLayout& p : priced) {
    const PlanLayout& l = p.layout;
    if (l.pp == 1 || !l.pipeline_layers.empty()) continue;
    if (best_step > 0 && balanced_step_bound(model, l, cluster) >= best_step) continue;
    // Moving blocks between stages evens their memory out, but does not halve the heaviest: a
    // layout needing twice the GPU's memory at even is not searched.
    if (static_cast<double>(p.memory.total()) > 2 * cluster.usable_memory_bytes()) continue;
    const Schedule& schedule =
        schedules.at(std::make_tuple(l.schedule, l.pp, l.microbatches, l.virtual_stages));
    const StageBalance b =
        balance_stages(model, l, {cluster, schedule, cluster.usable_memory_bytes(), device});
    PricedLayout at = p;
    // The even split stays "even" (and train's default in the printed commands).
    if (b.chosen.counts != b.even.counts) at.layout.pipeline_layers = b.chosen.counts;
    at.step = b.chosen.step;
    at.memory = b.chosen.memory;
    at.fits = b.chosen.fits;
    if (at.fits && (best_step == 0 || at.step.step_time_s < best_step))
      best_step = at.step.step_time_s;
    if (splits == PipelineSplits::kBalanced) {
      p = at;  // the layout at its balanced split
      continue;
    }
    if (b.chosen.counts == b.even.counts) continue;
    balanced.push_back(at);
  }
  priced.insert(priced.end(), balanced.begin(), balanced.end());
  std::stable_sort(priced.begin(), priced.end(), ranks_before);
  return priced;
}

std::string usable_memory_text(const Cluster& cluster) {
  if (cluster.memory_headroom_bytes <= 0)
    return GPT_MSG(cluster.gpu.memory_bytes / kGB << " GB of a " << cluster.gpu.name);
  return GPT_MSG(cluster.usable_memory_bytes() / kGB
                 << " GB usable of a " << cluster.gpu.name << " (" << cluster.gpu.memory_bytes / kGB
                 << " GB less " << cluster.memory_headroom_bytes / kGB
                 << " GB of --memory-headroom)");
}

Json layout_json(const PricedLayout& p) {
  const PlanLayout& l = p.layout;
  Json j;
  j["tp"] = l.tp;
  j["pp"] = l.pp;
  j["dp"] = l.dp;
  j["schedule"] = schedule_name(l.schedule);
  j["virtual_stages"] = l.virtual_stages;
  j["pipeline_layers"] = l.pipeline_layers_text();
  j["micro_batch_size"] = l.micro_batch;
  j["microbatches"] = l.microbatches;
  j["sequence_parallel"] = l.sequence_parallel;
  j["recompute"] = recompute_name(l.recompute);
  j["recompute_layers"] = l.recompute_layers;
  j["distributed_optimizer"] = l.distributed_optimizer;
  j["precision"] = regime_name(l.regime());
  j["fits"] = p.fits;
  Json& memory = j["memory_bytes"];
  for (MemoryCategory c : kAllMemoryCategories) memory[memory_category_name(c)] = p.memory.bytes[c];
  memory["total"] = p.memory.total();
  const StepPrediction& s = p.step;
  j["step_time_s"] = s.step_time_s;
  j["tokens_per_s_per_gpu"] = s.tokens_per_s_per_gpu;
  j["model_tflops_per_gpu"] = s.model_tflops_per_gpu;
  j["mfu"] = s.mfu;
  j["compute_s"] = s.compute_s;
  j["tp_comm_exposed_s"] = s.tp_comm_exposed_s;
  j["pp_comm_exposed_s"] = s.pp_comm_exposed_s;
  j["dp_comm_exposed_s"] = s.dp_comm_exposed_s;
  j["bubble_s"] = s.bubble_s;
  j["critical_stage"] = s.critical_stage;
  return j;
}

std::string why_best(const std::vector<PricedLayout>& ranked, const Cluster& cluster) {
  if (ranked.empty()) return "";
  const PricedLayout& best = ranked[0];
  if (!best.fits) {
    return GPT_MSG("no layout fits the " << usable_memory_text(cluster)
                                         << "; the smallest need is shown");
  }
  if (ranked.size() < 2) return "only one layout satisfies the options";
  const PricedLayout& next = ranked[1];
  std::ostringstream out;
  out << "best: " << describe(best.layout) << "; runner-up: " << describe(next.layout) << "\n";
  if (!next.fits) {
    out << "why: the runner-up needs " << next.memory.total() / kGB << " GB, over the "
        << usable_memory_text(cluster);
    return out.str();
  }
  // Layouts whose options change nothing priced here (selective recomputation on GPUs, where
  // this project's attention keeps no probabilities) tie: say so rather than name a term.
  if (std::abs(next.step.step_time_s - best.step.step_time_s) <= 1e-12 * best.step.step_time_s) {
    out << "why: the same predicted step as the runner-up (" << best.step.step_time_s
        << " s): what differs between them costs nothing here; the first enumerated is shown first";
    return out.str();
  }
  const Term* decisive = &kTerms[0];
  for (const Term& t : kTerms) {
    if (next.step.*t.field - best.step.*t.field >
        next.step.*decisive->field - best.step.*decisive->field)
      decisive = &t;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "why: %.4g s faster a step (%.2f%%), decided by %s: %.4g s against %.4g s",
                next.step.step_time_s - best.step.step_time_s,
                100 * (next.step.step_time_s / best.step.step_time_s - 1), decisive->name,
                best.step.*decisive->field, next.step.*decisive->field);
  out << line;
  return out.str();
}

std::string ranked_table(const std::vector<PricedLayout>& ranked, int rows) {
  std::ostringstream out;
  char line[1024];  // an uneven split widens the schedule column
  std::snprintf(line, sizeof line,
                "%4s %3s %3s %4s %-15s %4s %5s %3s %-12s %4s %-14s %4s %8s %9s %9s %6s %8s %8s "
                "%8s %8s %8s\n",
                "rank", "tp", "pp", "dp", "schedule", "mb", "m", "sp", "recompute", "zero",
                "precision", "fits", "mem GB", "step s", "tok/s/gpu", "mfu", "compute", "tp s",
                "pp s", "dp s", "bubble");
  out << line;
  const int n = std::min<int>(rows, static_cast<int>(ranked.size()));
  for (int i = 0; i < n; ++i) {
    const PricedLayout& p = ranked[static_cast<size_t>(i)];
    const PlanLayout& l = p.layout;
    const StepPrediction& s = p.step;
    std::snprintf(
        line, sizeof line,
        "%4d %3d %3d %4d %-15s %4lld %5d %3s %-12s %4s %-14s %4s %8.2f %9.4g %9.4g "
        "%6.3f %8.4g %8.4g %8.4g %8.4g %8.4g\n",
        i + 1, l.tp, l.pp, l.dp, schedule_text(l).c_str(), static_cast<long long>(l.micro_batch),
        l.microbatches, l.sequence_parallel ? "yes" : "no", recompute_text(l).c_str(),
        l.distributed_optimizer ? "yes" : "no", regime_name(l.regime()), p.fits ? "yes" : "NO",
        p.memory.total() / kGB, s.step_time_s, s.tokens_per_s_per_gpu, s.mfu, s.compute_s,
        s.tp_comm_exposed_s, s.pp_comm_exposed_s, s.dp_comm_exposed_s, s.bubble_s);
    out << line;
  }
  return out.str();
}

}  // namespace gpt
