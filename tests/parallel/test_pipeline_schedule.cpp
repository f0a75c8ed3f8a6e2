// Pipeline schedules without MPI or a model: every valid (schedule, pp, microbatches, v) up to
// pp 8, 16 microbatches and 4 virtual stages passes the checker; unit-cost replays reach the
// closed-form bubbles; peaks, per stage and per (stage, chunk), match what each schedule states;
// and the checker rejects lists broken on purpose (missing, duplicated, mixed, deadlocking,
// misstated). Also the layout's size rules that guard its divisions (parallel/layout.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/check.h"
#include "parallel/layout.h"
#include "parallel/pipeline_schedule.h"
#include "tests/test_util.h"

namespace gpt {
namespace {

// The published bubble share of a step with F, B and W costing the same, a full backward (2F)
// handing over its gradient at its end (simulate's B-input 2, W 0; ZB-H1's B-input and W 1 each):
// (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) for interleaved, (p-1)/(3m+p-1) for ZB-H1, and
// for forward-only 1 - v*m / (v*p + (m-1)*((v-1)*p + 1)) (each microbatch leaves the first stage's
// chunk 0 only after its previous one came back round the ring). Throws for settings make_schedule
// refuses.
// Kept here, where it is the reference the replay is tested against: the runtime and the
// planner take bubbles from the replay itself.
double theoretical_bubble(ScheduleKind kind, int pp, int m, int v) {
  make_schedule(kind, pp, m, v);  // throws for the settings it refuses
  const double fill = pp - 1;
  // The fill and drain last pp-1 action slots; the steady work is m microbatches of F+B, v*m
  // chunk-sized ones for interleaved, and 3m single passes for ZB-H1 where W fills the drain.
  switch (kind) {
    case ScheduleKind::kGpipe:
    case ScheduleKind::k1f1b:
      return fill / (m + fill);
    case ScheduleKind::kInterleaved:
      return fill / (static_cast<double>(v) * m + fill);
    case ScheduleKind::kZbH1:
      return fill / (3.0 * m + fill);
    case ScheduleKind::kForwardOnly: {
      // Stage 0 starts a microbatch (v-1)*pp + 1 steps after the previous one, which had to go
      // round the ring to its last chunk there first; the last one then takes v*pp steps.
      const double makespan = static_cast<double>(v) * pp + (m - 1.0) * ((v - 1.0) * pp + 1);
      return 1 - static_cast<double>(v) * m / makespan;
    }
  }
  return 0;
}

// The training schedules (forward-only has its own test).
std::vector<ScheduleKind> training_kinds() {
  return {ScheduleKind::kGpipe, ScheduleKind::k1f1b, ScheduleKind::kInterleaved,
          ScheduleKind::kZbH1};
}

std::string settings(ScheduleKind kind, int pp, int m, int v) {
  return std::string(schedule_name(kind)) + " pp " + std::to_string(pp) + " m " +
         std::to_string(m) + " v " + std::to_string(v);
}

// The rules of make_schedule, restated independently so that the sweep tests both sides.
bool valid_settings(ScheduleKind kind, int pp, int m, int v) {
  if (kind == ScheduleKind::kInterleaved) return pp >= 2 && v >= 2 && m % pp == 0;
  if (v != 1) return false;
  return kind != ScheduleKind::kZbH1 || m >= pp;
}

// The message a call throws, or "" if it does not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string check_error(const Schedule& s) {
  return error_of([&] { check_schedule(s); });
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Action fwd(int mb, int chunk = 0) {
  return {ActionKind::kForward, mb, chunk};
}
Action bwd(int mb, int chunk = 0) {
  return {ActionKind::kBackward, mb, chunk};
}
Action bwd_input(int mb) {
  return {ActionKind::kBackwardInput, mb, 0};
}
Action bwd_weight(int mb) {
  return {ActionKind::kBackwardWeight, mb, 0};
}

TEST(PipelineSchedule, EveryValidSettingPassesTheChecker) {
  int valid = 0;
  for (ScheduleKind kind : training_kinds()) {
    for (int pp = 1; pp <= 8; ++pp) {
      for (int m = 1; m <= 16; ++m) {
        for (int v = 1; v <= 4; ++v) {
          SCOPED_TRACE(settings(kind, pp, m, v));
          if (!valid_settings(kind, pp, m, v)) {
            EXPECT_THROW(make_schedule(kind, pp, m, v), Error);
            continue;
          }
          ++valid;
          const Schedule s = make_schedule(kind, pp, m, v);
          EXPECT_EQ(s.kind, kind);
          EXPECT_EQ(s.splits_backward(), kind == ScheduleKind::kZbH1);
          ASSERT_EQ(s.stages.size(), static_cast<size_t>(pp));
          EXPECT_NO_THROW(check_schedule(s));
          // What the NCCL transport relies on (it has no tags).
          EXPECT_TRUE(transfers_match_in_order(s));
          // Each stage runs 2 actions per owned (microbatch, chunk), 3 when the backward is split.
          const size_t per = kind == ScheduleKind::kZbH1 ? 3 : 2;
          for (const auto& list : s.stages) EXPECT_EQ(list.size(), per * m * v);
          // The chunks' caches cover the stage's (they may peak at different times), and no
          // chunk holds more than its m forwards.
          for (int stage = 0; stage < pp; ++stage) {
            int chunk_sum = 0;
            for (int c = 0; c < v; ++c) {
              EXPECT_LE(s.cache_slots(stage, c), m);
              chunk_sum += s.cache_slots(stage, c);
            }
            EXPECT_GE(chunk_sum, s.stated_caches[stage]);
            if (v == 1) {
              EXPECT_EQ(chunk_sum, s.stated_caches[stage]);
            }
          }
        }
      }
    }
  }
  // gpipe and 1f1b: all 128; zb-h1: m >= pp, 16 + 15 + ... + 9; interleaved: pp 2..8 times
  // the multiples of pp up to 16 (8 + 5 + 4 + 3 + 2 + 2 + 2) times v 2..4.
  EXPECT_EQ(valid, 128 + 128 + 100 + 26 * 3);
}

TEST(PipelineSchedule, TransferOrderCheckSeesSwappedReceives) {
  // Stage 1 takes microbatch 1 first: MPI's tags would sort it out, NCCL would not.
  Schedule s = make_schedule(ScheduleKind::kGpipe, 2, 2, 1);
  EXPECT_TRUE(transfers_match_in_order(s));
  std::swap(s.stages[1][0], s.stages[1][1]);
  EXPECT_FALSE(transfers_match_in_order(s));
  // Only the backward swapped: the forward-only order (eval) still matches, the step does not.
  s = make_schedule(ScheduleKind::kGpipe, 2, 2, 1);
  std::swap(s.stages[0][2], s.stages[0][3]);
  EXPECT_FALSE(transfers_match_in_order(s));
}

TEST(PipelineSchedule, InvalidSettingsNameTheOption) {
  struct Invalid {
    ScheduleKind kind;
    int pp, m, v;
    std::string message;
  };
  const std::vector<Invalid> cases = {
      {ScheduleKind::kInterleaved, 4, 6, 2,
       "--schedule interleaved needs the microbatches (global batch / (dp x micro batch)) 6 "
       "to be a multiple of --pp 4"},
      {ScheduleKind::k1f1b, 4, 8, 2, "--virtual-stages 2 needs --schedule interleaved"},
      {ScheduleKind::kZbH1, 4, 2, 1,
       "--schedule zb-h1 needs at least --pp microbatches (got 2 for --pp 4)"},
      {ScheduleKind::kInterleaved, 1, 4, 2,
       "--schedule interleaved needs --pp of at least 2 (got 1)"},
      {ScheduleKind::kInterleaved, 4, 8, 1,
       "--schedule interleaved needs --virtual-stages of at least 2 (got 1)"},
      {ScheduleKind::k1f1b, 4, 0, 1,
       "the microbatches (global batch / (dp x micro batch)) must be at least 1 (got 0)"},
      {ScheduleKind::kGpipe, 0, 4, 1, "--pp must be at least 1 (got 0)"},
  };
  for (const Invalid& c : cases)
    EXPECT_EQ(error_of([&] { make_schedule(c.kind, c.pp, c.m, c.v); }), c.message);
  EXPECT_EQ(error_of([] { theoretical_bubble(ScheduleKind::kZbH1, 4, 3, 1); }),
            "--schedule zb-h1 needs at least --pp microbatches (got 3 for --pp 4)");
}

TEST(PipelineSchedule, UnitCostBubbleMatchesTheFormula) {
  for (ScheduleKind kind : training_kinds()) {
    for (int pp = 1; pp <= 8; ++pp) {
      for (int m = 1; m <= 16; ++m) {
        for (int v = 1; v <= 4; ++v) {
          if (!valid_settings(kind, pp, m, v)) continue;
          SCOPED_TRACE(settings(kind, pp, m, v));
          const Schedule s = make_schedule(kind, pp, m, v);
          // The published formulas: a full backward (2F) hands over its gradient at its end,
          // which the replay's B-input 2 and W 0 are; ZB-H1's split passes cost F each.
          const bool split = kind == ScheduleKind::kZbH1;
          const Timeline published = simulate(s, split ? ActionCosts{} : ActionCosts{1, 2, 0});
          EXPECT_NEAR(published.bubble_fraction, theoretical_bubble(kind, pp, m, v), 1e-9);
          // F, B-input and W at 1, as the executor runs a full backward (its gradient leaves
          // after the input half): the fill/drain slots plus the work of one stage. GPipe's and
          // 1F1B's slot is then F + B-input; interleaved's drain stays as busy as before.
          const Timeline t = simulate(s, ActionCosts{});
          const double per_mb = kind == ScheduleKind::kInterleaved ? 3.0 * v : 3.0;
          const double slot = split ? 1 : kind == ScheduleKind::kInterleaved ? 3 : 2;
          EXPECT_NEAR(t.makespan, per_mb * m + slot * (pp - 1), 1e-9);
        }
      }
    }
  }
  EXPECT_NEAR(theoretical_bubble(ScheduleKind::k1f1b, 4, 8, 1), 3.0 / 11, 1e-12);
  EXPECT_NEAR(theoretical_bubble(ScheduleKind::kInterleaved, 4, 8, 2), 3.0 / 19, 1e-12);
  EXPECT_NEAR(theoretical_bubble(ScheduleKind::kZbH1, 4, 8, 1), 3.0 / 27, 1e-12);
}

TEST(PipelineSchedule, PeakCachesMatchWhatEachScheduleStates) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = 1; m <= 16; ++m) {
      const Schedule gpipe = make_schedule(ScheduleKind::kGpipe, pp, m, 1);
      const Schedule one_f_one_b = make_schedule(ScheduleKind::k1f1b, pp, m, 1);
      EXPECT_EQ(simulate(gpipe, ActionCosts{}).peak_caches, std::vector<int>(pp, m));
      std::vector<int> expected(pp);
      for (int stage = 0; stage < pp; ++stage) expected[stage] = std::min(pp - stage, m);
      EXPECT_EQ(one_f_one_b.stated_caches, expected);
      EXPECT_EQ(simulate(one_f_one_b, ActionCosts{}).peak_caches, expected);
      for (int stage = 0; stage < pp; ++stage) {
        // One chunk: the stage's count; a whole B takes one gradient set and gives it back.
        EXPECT_EQ(gpipe.cache_slots(stage, 0), m);
        EXPECT_EQ(one_f_one_b.cache_slots(stage, 0), expected[stage]);
        EXPECT_EQ(gpipe.grad_sets(stage, 0), 1);
        EXPECT_EQ(one_f_one_b.grad_sets(stage, 0), 1);
      }
      if (m >= pp) {
        // ZB-H1 holds a cache until its W: pp on every stage, 1F1B's stage-0 peak; until B-input
        // it holds what 1F1B holds. Gradient sets, B-input to W: the stage's s deferred W's and
        // the one whose B-input just ran.
        const Schedule zb = make_schedule(ScheduleKind::kZbH1, pp, m, 1);
        EXPECT_EQ(zb.stated_caches, std::vector<int>(pp, pp));
        EXPECT_EQ(zb.stated_b_caches, expected);
        EXPECT_EQ(simulate(zb, ActionCosts{}).peak_caches, zb.stated_caches);
        for (int stage = 0; stage < pp; ++stage) {
          EXPECT_EQ(zb.cache_slots(stage, 0), pp);
          EXPECT_EQ(zb.grad_sets(stage, 0), stage + 1);
        }
      }
    }
  }
  // Interleaved: warmup (pp-s-1)*2 + (v-1)*pp forwards, plus the steady state's one ahead.
  const Schedule il = make_schedule(ScheduleKind::kInterleaved, 4, 8, 2);
  EXPECT_EQ(il.stated_caches, (std::vector<int>{11, 9, 7, 5}));
  EXPECT_EQ(simulate(il, ActionCosts{}).peak_caches, il.stated_caches);
  // Per chunk (each allocates its own): the chunks peak at different times, so they sum to more
  // than the stage's peak, {12, 12, 10, 6}; each chunk once allocated the stage's whole count,
  // 22, 18, 14 and 10 caches for the two.
  const std::vector<std::vector<int>> per_chunk{{8, 4}, {8, 4}, {7, 3}, {5, 1}};
  for (int stage = 0; stage < 4; ++stage) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(il.cache_slots(stage, c), per_chunk[stage][c])
          << "stage " << stage << " chunk " << c;
      EXPECT_EQ(il.grad_sets(stage, c), 1);
    }
  }
  EXPECT_EQ(il.stated_chunk_caches, per_chunk);
  // Clamped to all v*m forwards when the warmup would take more than there are.
  const Schedule clamped = make_schedule(ScheduleKind::kInterleaved, 4, 4, 2);
  EXPECT_EQ(clamped.stated_caches, (std::vector<int>{8, 8, 7, 5}));
  EXPECT_EQ(clamped.stated_chunk_caches,
            (std::vector<std::vector<int>>{{4, 4}, {4, 4}, {4, 3}, {4, 1}}));
  // v 3: the middle chunk lies between; chunk 0 again holds two groups' worth.
  EXPECT_EQ(make_schedule(ScheduleKind::kInterleaved, 4, 8, 3).stated_chunk_caches,
            (std::vector<std::vector<int>>{{8, 7, 4}, {8, 5, 4}, {8, 4, 3}, {8, 4, 1}}));
}

TEST(PipelineSchedule, ForwardOnlyRunsEachMicrobatchThroughEveryChunk) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = 1; m <= 16; ++m) {
      for (int v = 1; v <= 4; ++v) {
        SCOPED_TRACE(settings(ScheduleKind::kForwardOnly, pp, m, v));
        const Schedule s = make_forward_only_schedule(pp, m, v);
        EXPECT_EQ(s.kind, ScheduleKind::kForwardOnly);
        EXPECT_FALSE(s.splits_backward());
        EXPECT_NO_THROW(check_schedule(s));
        EXPECT_TRUE(transfers_match_in_order(s));
        // Each F's cache is free again after it: one per chunk, one for the stage, no gradients.
        EXPECT_EQ(s.stated_caches, std::vector<int>(pp, 1));
        EXPECT_EQ(s.stated_b_caches, s.stated_caches);
        EXPECT_EQ(s.stated_chunk_caches, std::vector<std::vector<int>>(pp, std::vector<int>(v, 1)));
        EXPECT_EQ(s.stated_chunk_grad_sets,
                  std::vector<std::vector<int>>(pp, std::vector<int>(v, 0)));
        const Timeline t = simulate(s, ActionCosts{});
        EXPECT_NEAR(t.bubble_fraction, theoretical_bubble(ScheduleKind::kForwardOnly, pp, m, v),
                    1e-9);
      }
    }
  }
  EXPECT_EQ(make_forward_only_schedule(2, 2, 2).stages[1],
            (std::vector<Action>{fwd(0, 0), fwd(0, 1), fwd(1, 0), fwd(1, 1)}));
  // One chunk: the fill, then a microbatch per step, (pp-1)/(m+pp-1) as GPipe's.
  EXPECT_NEAR(theoretical_bubble(ScheduleKind::kForwardOnly, 4, 8, 1), 3.0 / 11, 1e-12);
  Schedule s = make_forward_only_schedule(2, 2, 1);
  s.stages[1].push_back(bwd(0));
  EXPECT_TRUE(contains(check_error(s), "stage 1 has a backward for mb 0, chunk 0"))
      << check_error(s);
}

TEST(PipelineSchedule, OneStageDegeneratesToForwardBackwardPairs) {
  EXPECT_EQ(make_schedule(ScheduleKind::k1f1b, 1, 3, 1).stages[0],
            (std::vector<Action>{fwd(0), bwd(0), fwd(1), bwd(1), fwd(2), bwd(2)}));
  EXPECT_EQ(make_schedule(ScheduleKind::kZbH1, 1, 2, 1).stages[0],
            (std::vector<Action>{fwd(0), bwd_input(0), bwd_weight(0), fwd(1), bwd_input(1),
                                 bwd_weight(1)}));
  // GPipe keeps its shape (all forwards, then all backwards) at one stage too.
  EXPECT_EQ(make_schedule(ScheduleKind::kGpipe, 1, 2, 1).stages[0],
            (std::vector<Action>{fwd(0), fwd(1), bwd(1), bwd(0)}));
  const Timeline t = simulate(make_schedule(ScheduleKind::k1f1b, 1, 3, 1), ActionCosts{});
  EXPECT_DOUBLE_EQ(t.makespan, 9);
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 0);
}

TEST(PipelineSchedule, OrdersFollowTheirConstruction) {
  const Schedule s = make_schedule(ScheduleKind::k1f1b, 4, 6, 1);
  // Stage 1: two warmup forwards, then pairs, then the two cooldown backwards.
  EXPECT_EQ(s.stages[1], (std::vector<Action>{fwd(0), fwd(1), fwd(2), bwd(0), fwd(3), bwd(1),
                                              fwd(4), bwd(2), fwd(5), bwd(3), bwd(4), bwd(5)}));
  // Interleaved pp 2, v 2: forwards in groups of pp microbatches per chunk; the last stage's
  // warmup is (v-1)*pp = 2 forwards.
  const Schedule il = make_schedule(ScheduleKind::kInterleaved, 2, 2, 2);
  EXPECT_EQ(il.stages[1], (std::vector<Action>{fwd(0, 0), fwd(1, 0), fwd(0, 1), bwd(0, 1),
                                               fwd(1, 1), bwd(1, 1), bwd(0, 0), bwd(1, 0)}));
  // ZB-H1 stage 1 of pp 2: W lags its B-input by one steady step, the rest fill the drain.
  EXPECT_EQ(make_schedule(ScheduleKind::kZbH1, 2, 3, 1).stages[1],
            (std::vector<Action>{fwd(0), bwd_input(0), fwd(1), bwd_input(1), bwd_weight(0), fwd(2),
                                 bwd_input(2), bwd_weight(1), bwd_weight(2)}));
}

TEST(PipelineSchedule, CheckerCatchesAMissingAction) {
  Schedule s = make_schedule(ScheduleKind::k1f1b, 4, 8, 1);
  s.stages[2].erase(s.stages[2].begin() + 5);
  EXPECT_TRUE(contains(check_error(s), "stage 2 has no F(mb 3, chunk 0)")) << check_error(s);

  Schedule zb = make_schedule(ScheduleKind::kZbH1, 4, 8, 1);
  auto& list = zb.stages[3];
  list.erase(std::find(list.begin(), list.end(), bwd_weight(4)));
  EXPECT_TRUE(contains(check_error(zb), "stage 3 has B-input but no W for mb 4, chunk 0"))
      << check_error(zb);
}

TEST(PipelineSchedule, CheckerCatchesADuplicatedAction) {
  Schedule s = make_schedule(ScheduleKind::kInterleaved, 4, 8, 2);
  s.stages[1].push_back(s.stages[1][3]);
  const std::string error = check_error(s);
  EXPECT_TRUE(contains(error, "stage 1 runs F(mb 3, chunk 0) twice (actions 4 and 33)")) << error;
}

TEST(PipelineSchedule, CheckerCatchesMixedBackwards) {
  Schedule zb = make_schedule(ScheduleKind::kZbH1, 2, 4, 1);
  auto& list = zb.stages[0];
  *std::find(list.begin(), list.end(), bwd_input(2)) = bwd(2);
  const std::string error = check_error(zb);
  EXPECT_TRUE(contains(error, "both B and B-input/W for mb 2, chunk 0")) << error;
}

TEST(PipelineSchedule, CheckerHoldsTheKindToItsBackwards) {
  Schedule zb = make_schedule(ScheduleKind::kZbH1, 2, 4, 1);
  auto& list = zb.stages[0];
  *std::find(list.begin(), list.end(), bwd_input(2)) = bwd(2);
  list.erase(std::find(list.begin(), list.end(), bwd_weight(2)));
  EXPECT_TRUE(contains(check_error(zb), "B for mb 2, chunk 0, but zb-h1 splits its backwards"))
      << check_error(zb);
  Schedule s = make_schedule(ScheduleKind::k1f1b, 1, 2, 1);
  s.stages[0] = {fwd(0), bwd(0), fwd(1), bwd_input(1), bwd_weight(1)};
  EXPECT_TRUE(contains(check_error(s), "B-input/W for mb 1, chunk 0, but 1f1b runs whole"))
      << check_error(s);
}

TEST(PipelineSchedule, CheckerCatchesADeadlockingOrder) {
  // Stage 0 waits for the gradient of mb 0 before sending the forward of mb 1, which stage 1
  // needs before it will send that gradient: a cycle across stages, each list fine on its own.
  Schedule s = make_schedule(ScheduleKind::kGpipe, 2, 2, 1);
  s.stages[0] = {fwd(0), bwd(0), fwd(1), bwd(1)};
  s.stages[1] = {fwd(0), fwd(1), bwd(0), bwd(1)};
  s.stated_caches = {1, 2};
  s.stated_b_caches = s.stated_caches;
  const std::string error = check_error(s);
  EXPECT_EQ(error,
            "schedule gpipe (pp 2, 2 microbatches, 1 virtual stages) stalls: stage 0 waits at "
            "B(mb 0, chunk 0) (action 2 of 4) for B(mb 0, chunk 0) on stage 1; stage 1 waits at "
            "F(mb 1, chunk 0) (action 2 of 4) for F(mb 1, chunk 0) on stage 0");
  EXPECT_THROW(simulate(s, ActionCosts{}), Error);

  // The same cycle in a bigger schedule: stage 0 of 1F1B takes B(mb 0) before its warmup ends.
  Schedule big = make_schedule(ScheduleKind::k1f1b, 4, 8, 1);
  auto& first = big.stages[0];
  first.erase(std::find(first.begin(), first.end(), bwd(0)));
  first.insert(first.begin() + 1, bwd(0));
  EXPECT_TRUE(contains(check_error(big), "stalls: stage 0 waits at B(mb 0, chunk 0)"))
      << check_error(big);

  // A backward listed before its own forward can never run either.
  Schedule early = make_schedule(ScheduleKind::k1f1b, 2, 2, 1);
  std::swap(early.stages[1][0], early.stages[1][1]);
  EXPECT_TRUE(contains(check_error(early), "stage 1 has the backward before the forward for mb 0"))
      << check_error(early);
}

TEST(PipelineSchedule, CheckerCatchesAWrongStatedCacheCount) {
  Schedule s = make_schedule(ScheduleKind::k1f1b, 4, 8, 1);
  s.stated_caches[1] = 2;
  EXPECT_TRUE(contains(check_error(s), "stage 1 holds up to 3 forward caches, stated 2"))
      << check_error(s);
  Schedule zb = make_schedule(ScheduleKind::kZbH1, 4, 8, 1);
  zb.stated_caches[3] = 1;  // the 1F1B count, forgetting the caches that wait for a deferred W
  EXPECT_TRUE(contains(check_error(zb), "stage 3 holds up to 4 forward caches, stated 1"))
      << check_error(zb);
  // Per chunk: the stage's total given to one chunk (what runs allocated before), and the
  // gradient sets ZB-H1 runs used to allocate (one per cache).
  Schedule il = make_schedule(ScheduleKind::kInterleaved, 4, 8, 2);
  il.stated_chunk_caches[2][1] = il.stated_caches[2];
  EXPECT_TRUE(contains(check_error(il), "stage 2 chunk 1 holds up to 3 forward caches, stated 7"))
      << check_error(il);
  Schedule sets = make_schedule(ScheduleKind::kZbH1, 4, 8, 1);
  sets.stated_chunk_grad_sets[1][0] = sets.stated_caches[1];
  EXPECT_TRUE(contains(check_error(sets), "stage 1 chunk 0 holds up to 2 gradient sets, stated 4"))
      << check_error(sets);
}

TEST(PipelineSchedule, CheckerCatchesForeignChunksAndMicrobatches) {
  Schedule s = make_schedule(ScheduleKind::k1f1b, 2, 4, 1);
  s.stages[0][0].chunk = 1;
  EXPECT_TRUE(contains(check_error(s), "outside its microbatches or chunks")) << check_error(s);
  Schedule t = make_schedule(ScheduleKind::k1f1b, 2, 4, 1);
  t.stages.pop_back();
  EXPECT_TRUE(contains(check_error(t), "has 1 stage lists, not 2")) << check_error(t);
}

// With uneven costs and a link latency, the replay keeps each stage's list order without overlap
// and starts every action after its inputs arrived.
TEST(PipelineSchedule, TimelineHonorsOrderAndDependencies) {
  const ActionCosts costs{1.0, 1.5, 0.75, 0.25};
  for (ScheduleKind kind : training_kinds()) {
    const Schedule s = make_schedule(kind, 4, 8, kind == ScheduleKind::kInterleaved ? 2 : 1);
    const Timeline t = simulate(s, costs);
    ASSERT_EQ(t.actions.size(), s.stages[0].size() * 4);
    std::vector<std::vector<TimedAction>> by_stage(4);
    for (const TimedAction& a : t.actions) by_stage[a.stage].push_back(a);
    const auto end_of = [&](int stage, const Action& a) {
      for (const TimedAction& x : by_stage[stage])
        if (x.action == a) return x.end;
      ADD_FAILURE() << "no " << describe(a) << " on stage " << stage;
      return 0.0;
    };
    double busy = 0;
    for (int stage = 0; stage < 4; ++stage) {
      std::vector<Action> order;
      for (size_t i = 0; i < by_stage[stage].size(); ++i) {
        const TimedAction& a = by_stage[stage][i];
        order.push_back(a.action);
        busy += a.end - a.start;
        if (i > 0) {
          EXPECT_GE(a.start, by_stage[stage][i - 1].end);
        }
        const int vs = virtual_stage(4, stage, a.action.chunk);
        const int mb = a.action.microbatch;
        const int last = 4 * s.virtual_stages - 1;
        if (a.action.kind == ActionKind::kForward && vs > 0) {
          const int from = (vs - 1) % 4;
          EXPECT_GE(a.start, end_of(from, fwd(mb, (vs - 1) / 4)) + costs.comm);
        }
        if (a.action.kind != ActionKind::kForward && a.action.kind != ActionKind::kBackwardWeight) {
          EXPECT_GE(a.start, end_of(stage, fwd(mb, a.action.chunk)));
          if (vs < last) {
            // A full backward hands over its input gradient after its input half.
            const Action up{a.action.kind, mb, (vs + 1) / 4};
            const double weight_half =
                a.action.kind == ActionKind::kBackward ? costs.backward_weight : 0.0;
            EXPECT_GE(a.start, end_of((vs + 1) % 4, up) - weight_half + costs.comm);
          }
        }
        if (a.action.kind == ActionKind::kBackwardWeight) {
          EXPECT_GE(a.start, end_of(stage, bwd_input(mb)));
        }
      }
      EXPECT_EQ(order, s.stages[stage]);
    }
    EXPECT_NEAR(t.bubble_fraction, 1 - busy / (4 * t.makespan), 1e-12);
    // Latency only adds: the unit-cost bubble is the floor for these costs' shape.
    EXPECT_GT(t.makespan, simulate(s, ActionCosts{1.0, 1.5, 0.75, 0}).makespan);
  }
}

// A send completes once its peer is there to receive it, and the executor completes a buffer's
// send before reusing the buffer. The forward-only schedule holds one cache slot a stage: stage 0
// sends each F's output from it, and may overwrite it with the next F only once stage 1 is done
// with the action before the receiving one (stage 1's forwards cost 3, stage 0's 1, comm 0.5).
TEST(PipelineSchedule, ReusingABufferWaitsForItsReceiverToBeReady) {
  const std::vector<PassCosts> per_vs = {{1, 1, 1}, {3, 1, 1}};
  const auto stage0_starts = [&](bool rendezvous) {
    ActionCosts costs{1, 1, 1, 0.5};
    costs.rendezvous = rendezvous;
    std::vector<double> starts;
    for (const TimedAction& a :
         simulate(make_forward_only_schedule(2, 3, 1), costs, per_vs).actions)
      if (a.stage == 0) starts.push_back(a.start);
    return starts;
  };
  // F1: stage 1 was ready for F0 from the start. F2: stage 1 runs F0 from 1.5 (its input's
  // arrival) to 4.5, and only then receives F1.
  EXPECT_EQ(stage0_starts(true), (std::vector<double>{0, 1, 4.5}));
  // Sends that complete when handed over (below an eager limit) hold nothing up.
  EXPECT_EQ(stage0_starts(false), (std::vector<double>{0, 1, 2}));
}

TEST(PipelineSchedule, AFullBackwardHandsOverItsGradientBeforeItsWeightHalf) {
  // 1F1B, pp 2, one microbatch: F 1, B-input 2, W 3 on both stages, comm 0.5. Stage 1 runs F0
  // from 1.5 and B0 from 2.5; its input gradient leaves at 4.5 (not at B0's end, 7.5) and
  // reaches stage 0 at 5, whose B0 ends at 10 while stage 1's ends at 7.5.
  const Timeline t =
      simulate(make_schedule(ScheduleKind::k1f1b, 2, 1, 1), ActionCosts{1, 2, 3, 0.5});
  std::vector<std::pair<double, double>> backwards;  // (start, end) of stage 0's, then 1's
  for (int stage : {0, 1})
    for (const TimedAction& a : t.actions)
      if (a.stage == stage && a.action.kind == ActionKind::kBackward)
        backwards.emplace_back(a.start, a.end);
  ASSERT_EQ(backwards.size(), 2u);
  EXPECT_DOUBLE_EQ(backwards[1].first, 2.5);
  EXPECT_DOUBLE_EQ(backwards[0].first, 5.0);
  EXPECT_DOUBLE_EQ(t.makespan, 10.0);
}

// Sizes that would divide by zero or overflow are one-line input errors before any division:
// --virtual-stages 0, a tp x pp product beyond an int, a micro-batch times dp beyond 64 bits, a
// global batch beyond kMaxGlobalBatchSize.
TEST(Layout, SizesThatWouldDivideByZeroOrOverflowAreInputErrors) {
  const ModelConfig model{4, 4, 128, 48, 256};
  Layout layout;
  layout.virtual_stages = 0;
  expect_error([&] { layout.validate(model, 8); }, {"--virtual-stages must be at least 1"});
  layout = Layout{};
  layout.tp = 65536;
  layout.pp = 65536;  // the product, 2^32, wraps an int to 0
  expect_error([&] { layout.validate_grid(8); }, {"--tp 65536 x --pp 65536", "8 ranks"});
  layout = Layout{};
  layout.micro_batch = int64_t{1} << 62;  // x dp 4 would wrap to 0
  expect_error([&] { layout.step_microbatches(64, 4); },
               {"--global-batch-size 64", "--micro-batch-size 4611686018427387904"});
  expect_error([&] { Layout{}.step_microbatches(kMaxGlobalBatchSize + 1, 1); },
               {"--global-batch-size must be in [1, 1048576]"});
  EXPECT_EQ(Layout{}.step_microbatches(kMaxGlobalBatchSize, 1), kMaxGlobalBatchSize);
}

}  // namespace
}  // namespace gpt
