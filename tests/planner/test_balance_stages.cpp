// --pipeline-layers auto (parallel/planner/balance_stages.h): on small models the split the
// search picks is the one a brute-force search over every valid split picks, for each schedule,
// with and without a memory limit that rules out the fastest split; a head that dominates moves
// blocks off the last stage; and no split beats the balanced bound plan prunes by.
#include <gtest/gtest.h>

#include <functional>

#include "parallel/planner/balance_stages.h"
#include "parallel/planner/cluster.h"

namespace gpt {
namespace {

// Every split of model.n_layer blocks over pp x v virtual stages that --pipeline-layers accepts.
void for_each_split(const ModelConfig& m, const PlanLayout& l,
                    const std::function<void(const std::vector<int64_t>&)>& visit) {
  const size_t parts = static_cast<size_t>(l.pp) * l.virtual_stages;
  std::vector<int64_t> counts(parts, 0);
  std::function<void(size_t, int64_t)> place = [&](size_t vs, int64_t left) {
    if (vs + 1 == parts) {
      counts[vs] = left;
      if (valid_split(m, l, counts)) visit(counts);
      return;
    }
    for (int64_t n = 0; n <= left; ++n) {
      counts[vs] = n;
      place(vs + 1, left - n);
    }
  };
  place(0, m.n_layer);
}

SplitPrice brute_force(const ModelConfig& m, const PlanLayout& l, const SplitSearch& search,
                       int64_t* splits) {
  SplitPrice best;
  bool any = false;
  for_each_split(m, l, [&](const std::vector<int64_t>& counts) {
    const SplitPrice p = price_split(m, l, search, counts);
    ++*splits;
    if (!any || split_ranks_before(p, best)) best = p;
    any = true;
  });
  return best;
}

PlanLayout pipeline(int pp, ScheduleKind kind, int v, int microbatches) {
  PlanLayout l;
  l.pp = pp;
  l.schedule = kind;
  l.virtual_stages = v;
  l.microbatches = microbatches;
  l.precision = PrecisionRegime::kFp32;
  return l;
}

struct Case {
  const char* name;
  ModelConfig model;
  PlanLayout layout;
};

// GPT-2's vocabulary on a narrow model: the head costs several blocks.
const ModelConfig kHeadHeavy{8, 4, 128, 256, 50257};
// GPT-2 small's width and vocabulary with 12 layers.
const ModelConfig kGpt2Width{12, 12, 768, 1024, 50257};
// A small vocabulary: the head costs less than a block.
const ModelConfig kHeadLight{6, 4, 256, 256, 512};

const Case kCases[] = {
    {"1f1b pp2", kHeadHeavy, pipeline(2, ScheduleKind::k1f1b, 1, 8)},
    {"1f1b pp4", kHeadHeavy, pipeline(4, ScheduleKind::k1f1b, 1, 8)},
    {"gpipe pp3", kHeadLight, pipeline(3, ScheduleKind::kGpipe, 1, 6)},
    {"zb-h1 pp3", kHeadHeavy, pipeline(3, ScheduleKind::kZbH1, 1, 6)},
    {"interleaved pp2 v2", kHeadHeavy, pipeline(2, ScheduleKind::kInterleaved, 2, 4)},
    {"1f1b pp4 light", kHeadLight, pipeline(4, ScheduleKind::k1f1b, 1, 16)},
    {"1f1b pp4 gpt2 width", kGpt2Width, pipeline(4, ScheduleKind::k1f1b, 1, 8)},
    {"interleaved pp2 v3 gpt2 width", kGpt2Width, pipeline(2, ScheduleKind::kInterleaved, 3, 4)},
    {"zb-h1 pp4 gpt2 width", kGpt2Width, pipeline(4, ScheduleKind::kZbH1, 1, 12)},
};

TEST(BalanceStages, TheSearchFindsTheBruteForceBest) {
  const Cluster cluster = cluster_preset("dgx-h100");
  for (const Case& c : kCases) {
    const Schedule schedule = make_schedule(c.layout.schedule, c.layout.pp, c.layout.microbatches,
                                            c.layout.virtual_stages);
    const SplitSearch search{cluster, schedule, 0, DeviceKind::kCuda};
    int64_t splits = 0;
    const SplitPrice best = brute_force(c.model, c.layout, search, &splits);
    const StageBalance found = balance_stages(c.model, c.layout, search);
    EXPECT_EQ(found.chosen.counts, best.counts) << c.name << " (" << splits << " splits)";
    EXPECT_DOUBLE_EQ(found.chosen.step.step_time_s, best.step.step_time_s) << c.name;
    EXPECT_LT(found.priced, splits) << c.name << ": the search priced every split";
    EXPECT_LE(found.chosen.step.step_time_s, found.even.step.step_time_s) << c.name;
    EXPECT_GE(found.chosen.step.step_time_s,
              balanced_step_bound(c.model, c.layout, cluster) * (1 - 1e-12))
        << c.name;

    // A limit below the fastest split's heaviest stage: the best of those under it.
    SplitSearch limited = search;
    limited.memory_limit_bytes = static_cast<double>(best.memory.total()) - 1;
    int64_t limited_splits = 0;
    const SplitPrice best_fitting = brute_force(c.model, c.layout, limited, &limited_splits);
    const StageBalance fitted = balance_stages(c.model, c.layout, limited);
    EXPECT_EQ(fitted.chosen.counts, best_fitting.counts) << c.name << " under a memory limit";
    EXPECT_EQ(fitted.chosen.fits, best_fitting.fits) << c.name;
  }
}

TEST(BalanceStages, ADominantHeadMovesBlocksOffTheLastStage) {
  const Cluster cluster = cluster_preset("dgx-h100");
  // GPT-2 small's width with 8 layers: the head's products are as big as 4 blocks' of them.
  ModelConfig model = kGpt2Width;
  model.n_layer = 8;
  PlanLayout l = pipeline(4, ScheduleKind::k1f1b, 1, 32);
  l.micro_batch = 4;
  const Schedule schedule = make_schedule(l.schedule, l.pp, l.microbatches, l.virtual_stages);
  const StageBalance b = balance_stages(model, l, {cluster, schedule, 0, DeviceKind::kCuda});
  EXPECT_EQ(b.even.counts, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_LT(b.chosen.counts.back(), 2);
  EXPECT_LT(b.chosen.step.step_time_s, 0.9 * b.even.step.step_time_s);
}

TEST(BalanceStages, OneStageHasOneSplit) {
  const Cluster cluster = cluster_preset("dgx-h100");
  const PlanLayout l = pipeline(1, ScheduleKind::k1f1b, 1, 4);
  const Schedule schedule = make_schedule(l.schedule, l.pp, l.microbatches, l.virtual_stages);
  const StageBalance b = balance_stages(kHeadHeavy, l, {cluster, schedule, 0, DeviceKind::kCuda});
  EXPECT_EQ(b.chosen.counts, (std::vector<int64_t>{8}));
  EXPECT_EQ(b.priced, 1);
}

}  // namespace
}  // namespace gpt
