// The balanced pipeline split (see balance_stages.h).
#include "parallel/planner/balance_stages.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "parallel/stage_layout.h"

namespace gpt {
namespace {

constexpr size_t kEveryPairUpTo = 8;
constexpr double kEveryPairActions = 4e6;

int64_t fewest_blocks(size_t vs, size_t parts) {
  return fewest_chunk_layers(static_cast<int64_t>(vs), static_cast<int64_t>(parts));
}

double pass_work(const ChunkCosts& c) {
  return c.forward.total() + c.backward_input.total() + c.backward_weight.total();
}

// Every block to the stage (then, inside it, the chunk) it lengthens least, by the chunks'
// per-microbatch work priced at the even split: a start near the bottleneck's optimum.
std::vector<int64_t> water_filled(const ModelConfig& m, const PlanLayout& l,
                                  const Cluster& cluster) {
  const size_t parts = static_cast<size_t>(l.pp) * l.virtual_stages;
  PlanLayout priced = l;
  priced.pipeline_layers = even_split(m, l);
  std::vector<double> fixed(parts), per_block(parts);
  for (size_t vs = 0; vs < parts; ++vs) {
    const int64_t n = priced.pipeline_layers[vs];
    const double at_n = pass_work(chunk_costs(m, priced, cluster, static_cast<int>(vs)));
    PlanLayout one_more = priced;
    one_more.pipeline_layers[vs] = n + 1;
    per_block[vs] = pass_work(chunk_costs(m, one_more, cluster, static_cast<int>(vs))) - at_n;
    fixed[vs] = at_n - static_cast<double>(n) * per_block[vs];
  }
  std::vector<int64_t> counts(parts);
  std::vector<double> stage_work(static_cast<size_t>(l.pp), 0.0);
  int64_t left = m.n_layer;
  for (size_t vs = 0; vs < parts; ++vs) {
    counts[vs] = fewest_blocks(vs, parts);
    left -= counts[vs];
    stage_work[vs % l.pp] += fixed[vs] + static_cast<double>(counts[vs]) * per_block[vs];
  }
  for (; left > 0; --left) {
    size_t best = parts;
    double best_end = 0;
    for (size_t vs = 0; vs < parts; ++vs) {
      const double end = stage_work[vs % l.pp] + per_block[vs];
      // Of equal ends the chunk holding fewest blocks, so a stage's chunks stay even.
      if (best == parts || end < best_end || (end == best_end && counts[vs] < counts[best])) {
        best = vs;
        best_end = end;
      }
    }
    ++counts[best];
    stage_work[best % l.pp] = best_end;
  }
  return counts;
}

}  // namespace

std::vector<int64_t> even_split(const ModelConfig& m, const PlanLayout& l) {
  std::vector<int64_t> counts;
  for (int chunk = 0; chunk < l.virtual_stages; ++chunk)
    for (int stage = 0; stage < l.pp; ++stage)
      counts.push_back(virtual_stage_spec(m, l.pp, l.virtual_stages, stage, chunk).n_layers);
  return counts;
}

bool valid_split(const ModelConfig& m, const PlanLayout& l, const std::vector<int64_t>& counts) {
  const size_t parts = static_cast<size_t>(l.pp) * l.virtual_stages;
  if (counts.size() != parts) return false;
  int64_t total = 0;
  for (size_t vs = 0; vs < parts; ++vs) {
    if (counts[vs] < fewest_blocks(vs, parts)) return false;
    total += counts[vs];
  }
  return total == m.n_layer;
}

SplitPrice price_split(const ModelConfig& m, const PlanLayout& layout, const SplitSearch& search,
                       const std::vector<int64_t>& counts) {
  PlanLayout l = layout;
  l.pipeline_layers = counts;
  SplitPrice p;
  p.counts = counts;
  p.step = predict_step(m, l, search.cluster, search.schedule);
  p.memory = plan_memory(m, l, search.schedule, search.device);
  p.fits = search.memory_limit_bytes <= 0 ||
           static_cast<double>(p.memory.total()) <= search.memory_limit_bytes;
  return p;
}

bool split_ranks_before(const SplitPrice& a, const SplitPrice& b) {
  if (a.fits != b.fits) return a.fits;
  const double ta = a.step.step_time_s, tb = b.step.step_time_s;
  if (std::abs(ta - tb) > 1e-9 * std::max(ta, tb)) return ta < tb;
  if (a.memory.total() != b.memory.total()) return a.memory.total() < b.memory.total();
  return a.counts < b.counts;
}

StageBalance balance_stages(const ModelConfig& m, const PlanLayout& l, const SplitSearch& search) {
  StageBalance out;
  std::map<std::vector<int64_t>, SplitPrice> priced;
  const auto price = [&](const std::vector<int64_t>& counts) -> const SplitPrice& {
    auto found = priced.find(counts);
    if (found == priced.end())
      found = priced.emplace(counts, price_split(m, l, search, counts)).first;
    return found->second;
  };
  out.even = price(even_split(m, l));
  SplitPrice best = out.even;
  if (l.pp > 1) {
    const SplitPrice& filled = price(water_filled(m, l, search.cluster));
    if (split_ranks_before(filled, best)) best = filled;
    const size_t parts = best.counts.size();
    // Every pair of virtual stages while an iteration's replays (parts^2 moves of parts x
    // microbatches actions each) stay cheap; beyond, neighbours along the model only (a chain of
    // such moves reaches any pair, though it can stop short of a pair's gain).
    const double actions = static_cast<double>(parts) * parts * parts * l.microbatches;
    const bool every_pair = parts <= kEveryPairUpTo || actions <= kEveryPairActions;
    for (;;) {
      SplitPrice next = best;
      for (size_t from = 0; from < parts; ++from) {
        if (best.counts[from] <= fewest_blocks(from, parts)) continue;
        for (size_t to = 0; to < parts; ++to) {
          if (to == from || (!every_pair && to + 1 != from && from + 1 != to)) continue;
          std::vector<int64_t> moved = best.counts;
          --moved[from];
          ++moved[to];
          const SplitPrice& p = price(moved);
          if (split_ranks_before(p, next)) next = p;
        }
      }
      if (next.counts == best.counts) break;
      best = next;
    }
  }
  out.chosen = best;
  out.priced = static_cast<int64_t>(priced.size());
  return out;
}

double balanced_step_bound(const ModelConfig& m, const PlanLayout& layout, const Cluster& cluster) {
  // On a CPU cluster a stage of fewer layers runs each faster (CpuModel::stage_scale): the
  // even split's work is no bound there.
  if (cluster.cpu.active() || layout.pp == 1) return 0;
  PlanLayout l = layout;
  l.pipeline_layers = even_split(m, l);
  double work = 0;
  for (int vs = 0; vs < l.pp * l.virtual_stages; ++vs)
    work += pass_work(chunk_costs(m, l, cluster, vs));
  return work * l.microbatches / l.pp;
}

}  // namespace gpt
