// The enumeration of layouts (see enumerate.h).
#include "parallel/planner/enumerate.h"

#include <algorithm>
#include <iterator>

#include "framework/check.h"

namespace gpt {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

bool is_fixed(const LayoutSearch& s, const char* name) {
  return s.fixed_options.count(name) > 0;
}

// A fixed option's one value, or every candidate.
template <typename T>
std::vector<T> values(const LayoutSearch& s, const char* name, T fixed, std::vector<T> all) {
  if (is_fixed(s, name)) return {fixed};
  return all;
}

// The cluster's placement rules, then every rule train applies (Layout::validate_step); throws
// the first one `l` breaks.
void check_layout(const LayoutSearch& s, const Cluster& cluster, const PlanLayout& l) {
  GPT_INPUT_CHECK(s.allow_tp_across_nodes || l.tp <= cluster.gpus_per_node,
                  "--tp " << l.tp << " spans more than a node of " << cluster.gpus_per_node
                          << " GPUs (--allow-tp-across-nodes allows it)");
  GPT_INPUT_CHECK(
      s.allow_tp_across_nodes || l.tp == 1 || !l.placement.by_node || l.placement.nodes == 1,
      "--tp " << l.tp << " with --map-by node puts each tp group across nodes "
              << "(--allow-tp-across-nodes allows it)");
  Layout asked = l;  // dp as given (0 when enumerated), so that validate checks it
  asked.dp = is_fixed(s, "dp") ? s.fixed.dp : 0;
  asked.validate_step(s.model, s.world, s.global_batch_size, "GPUs",
                      GPT_MSG("of --nodes " << s.nodes));
}

// The schedule-dependent candidates: the schedule and its virtual stages.
std::vector<std::pair<ScheduleKind, int>> schedule_choices(const LayoutSearch& s, int pp) {
  std::vector<ScheduleKind> kinds;
  if (is_fixed(s, "schedule"))
    kinds = {s.fixed.schedule};
  else if (pp == 1)
    kinds = {ScheduleKind::k1f1b};
  else
    kinds.assign(std::begin(kTrainingSchedules), std::end(kTrainingSchedules));
  std::vector<std::pair<ScheduleKind, int>> out;
  for (ScheduleKind k : kinds) {
    if (is_fixed(s, "virtual-stages") || k != ScheduleKind::kInterleaved) {
      out.emplace_back(k, is_fixed(s, "virtual-stages") ? s.fixed.virtual_stages : 1);
      continue;
    }
    const size_t listed = s.fixed.pipeline_layers.size();  // --pipeline-layers fixes pp x v
    if (listed > 0) {
      if (listed % static_cast<size_t>(pp) == 0 && listed / static_cast<size_t>(pp) >= 2)
        out.emplace_back(k, static_cast<int>(listed / static_cast<size_t>(pp)));
      continue;
    }
    for (int64_t v : divisors(s.model.n_layer / pp))
      if (v >= 2) out.emplace_back(k, static_cast<int>(v));
  }
  return out;
}

// The memory-saving candidates of one grid: recomputation (with, for full, its block counts),
// sequence parallelism and the distributed optimizer.
struct Savings {
  Recompute recompute;
  int64_t recompute_layers;
  bool sequence_parallel, distributed_optimizer;
};
std::vector<Savings> saving_choices(const LayoutSearch& s, int tp, int pp, int dp) {
  std::vector<Savings> out;
  const auto recomputes = values<Recompute>(
      s, "recompute", s.fixed.recompute,
      std::vector<Recompute>(std::begin(kRecomputeModes), std::end(kRecomputeModes)));
  for (Recompute r : recomputes) {
    std::vector<int64_t> layer_counts = {s.fixed.recompute_layers};
    if (r == Recompute::kFull && !is_fixed(s, "recompute-layers")) {
      // All blocks (0), and the powers of two below a stage's count (check_layout drops those
      // above an interleaved chunk's).
      for (int64_t n = 1; n < s.model.n_layer / pp; n *= 2) layer_counts.push_back(n);
    }
    for (int64_t n : layer_counts)
      for (bool sp : values<bool>(s, "sequence-parallel", s.fixed.sequence_parallel,
                                  tp > 1 ? std::vector<bool>{false, true} : std::vector{false}))
        for (bool dist : values<bool>(s, "distributed-optimizer", s.fixed.distributed_optimizer,
                                      dp > 1 ? std::vector<bool>{false, true} : std::vector{false}))
          out.push_back({r, r == Recompute::kFull ? n : 0, sp, dist});
  }
  return out;
}

}  // namespace

std::vector<PlanLayout> enumerate_layouts(const LayoutSearch& s, const Cluster& cluster) {
  const int world = s.world;
  const bool precision_fixed = is_fixed(s, "precision") && s.fixed.precision.has_value();
  const std::vector<PrecisionRegime> precisions =
      precision_fixed ? std::vector{*s.fixed.precision}
                      : std::vector{PrecisionRegime::kBf16, PrecisionRegime::kFp32};
  std::vector<PlanLayout> layouts;
  std::string first_error;
  for (int64_t tp : values<int64_t>(s, "tp", s.fixed.tp, divisors(world)))
    for (int64_t pp : values<int64_t>(s, "pp", s.fixed.pp, divisors(world))) {
      const int dp = static_cast<int>(world / (tp * pp));
      for (const auto& [schedule, v] : schedule_choices(s, static_cast<int>(pp)))
        for (int64_t mb : values<int64_t>(s, "micro-batch-size", s.fixed.micro_batch,
                                          divisors(s.global_batch_size / std::max(1, dp))))
          for (const Savings& sv :
               saving_choices(s, static_cast<int>(tp), static_cast<int>(pp), dp))
            for (PrecisionRegime precision : precisions) {
              PlanLayout l;
              l.tp = static_cast<int>(tp);
              l.pp = static_cast<int>(pp);
              l.dp = std::max(1, dp);
              l.schedule = schedule;
              l.virtual_stages = v;
              l.pipeline_layers = s.fixed.pipeline_layers;  // validate_step refuses a mismatch
              l.micro_batch = mb;
              l.recompute = sv.recompute;
              l.recompute_layers = sv.recompute_layers;
              l.sequence_parallel = sv.sequence_parallel;
              l.distributed_optimizer = sv.distributed_optimizer;
              l.precision = precision;
              l.grad_reduce_dtype = s.fixed.grad_reduce_dtype;
              l.placement = s.placement;
              try {
                check_layout(s, cluster, l);
                l.microbatches = l.step_microbatches(s.global_batch_size, world);
                layouts.push_back(l);
              } catch (const Error& e) {
                if (first_error.empty()) first_error = e.what();
              }
            }
    }
  GPT_INPUT_CHECK(!layouts.empty(),
                  (first_error.empty() ? "no layout satisfies the given options" : first_error));
  return layouts;
}

}  // namespace gpt
