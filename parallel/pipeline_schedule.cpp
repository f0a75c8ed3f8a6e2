// The pipeline schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1, forward-only) built as per-stage
// action lists with their stated counts. The checker that proves them is schedule_check.cpp, the
// cost replay schedule_replay.cpp.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "parallel/schedule_internal.h"

namespace gpt {

namespace schedule_detail {

std::string settings_text(const Schedule& s) {
  return GPT_MSG("schedule " << schedule_name(s.kind) << " (pp " << s.pp << ", " << s.microbatches
                             << " microbatches, " << s.virtual_stages << " virtual stages)");
}

}  // namespace schedule_detail

namespace {

using schedule_detail::settings_text;

void check_settings(ScheduleKind kind, int pp, int m, int v) {
  GPT_INPUT_CHECK(pp >= 1, "--pp must be at least 1 (got " << pp << ")");
  GPT_INPUT_CHECK(m >= 1,
                  "the microbatches (global batch / (dp x micro batch)) must be at least 1"
                  " (got "
                      << m << ")");
  GPT_INPUT_CHECK(v >= 1, "--virtual-stages must be at least 1 (got " << v << ")");
  if (kind != ScheduleKind::kInterleaved && kind != ScheduleKind::kForwardOnly) {
    GPT_INPUT_CHECK(v == 1, "--virtual-stages " << v << " needs --schedule interleaved");
  }
  if (kind == ScheduleKind::kInterleaved) {
    GPT_INPUT_CHECK(pp >= 2, "--schedule interleaved needs --pp of at least 2 (got " << pp << ")");
    GPT_INPUT_CHECK(
        v >= 2, "--schedule interleaved needs --virtual-stages of at least 2 (got " << v << ")");
    // The chunk order runs in groups of pp microbatches; a partial group would leave a chunk's
    // forwards out of step with the round trip the warmup is sized for.
    GPT_INPUT_CHECK(m % pp == 0,
                    "--schedule interleaved needs the microbatches (global batch / "
                    "(dp x micro batch)) "
                        << m << " to be a multiple of --pp " << pp);
  }
  if (kind == ScheduleKind::kZbH1) {
    GPT_INPUT_CHECK(m >= pp, "--schedule zb-h1 needs at least --pp microbatches (got "
                                 << m << " for --pp " << pp << ")");
  }
}

Action forward(int mb, int chunk = 0) {
  return {ActionKind::kForward, mb, chunk};
}
Action backward(int mb, int chunk = 0) {
  return {ActionKind::kBackward, mb, chunk};
}
Action backward_input(int mb) {
  return {ActionKind::kBackwardInput, mb, 0};
}
Action backward_weight(int mb) {
  return {ActionKind::kBackwardWeight, mb, 0};
}

// Every stage holds all m forwards before the first backward: simplest, most memory.
void build_gpipe(Schedule& s) {
  const int m = s.microbatches;
  for (int stage = 0; stage < s.pp; ++stage) {
    auto& list = s.stages[stage];
    for (int mb = 0; mb < m; ++mb) list.push_back(forward(mb));
    // Newest first: the last stage can start on the microbatch it just finished.
    for (int mb = m - 1; mb >= 0; --mb) list.push_back(backward(mb));
    s.stated_caches[stage] = s.stated_chunk_caches[stage][0] = m;
  }
}

// PipeDream-Flush: stage s runs ahead by the pp-s-1 forwards that are in flight downstream when
// its first gradient can come back, then alternates, so it never holds more than pp-s caches.
void build_1f1b(Schedule& s) {
  const int m = s.microbatches;
  for (int stage = 0; stage < s.pp; ++stage) {
    auto& list = s.stages[stage];
    const int warmup = std::min(s.pp - stage - 1, m);
    for (int mb = 0; mb < warmup; ++mb) list.push_back(forward(mb));
    for (int i = 0; i + warmup < m; ++i) {
      list.push_back(forward(i + warmup));
      list.push_back(backward(i));
    }
    for (int mb = m - warmup; mb < m; ++mb) list.push_back(backward(mb));
    s.stated_caches[stage] = s.stated_chunk_caches[stage][0] = std::min(s.pp - stage, m);
  }
}

// Chunk c's caches on stage s of interleaved 1F1B. The k-th forward of a stage is (mb, c) with
// k = group * v*pp + c*pp + mb % pp, and the backward of (mb, c) is its (k + (v-1-2c)*pp)-th; at
// steady step i the stage has run the forwards up to warmup + i and the backwards before i, so the
// chunk-c caches held are chunk c's forwards among L = warmup + 1 + (v-1-2c)*pp consecutive
// forward indices, L = 2(pp-s-1) + 1 + 2(v-1-c)*pp. Chunk c has a run of pp forwards every v*pp
// indices: at most floor(L / (v pp)) * pp + min(pp, L mod v pp) of them in such a window, and
// never more than its m (all of them when the warmup takes every forward).
int interleaved_chunk_caches(int pp, int v, int m, int stage, int chunk) {
  const int window = 2 * (pp - stage - 1) + 1 + 2 * (v - 1 - chunk) * pp, period = v * pp;
  return std::min(m, window / period * pp + std::min(pp, window % period));
}

// Interleaved 1F1B: each stage holds v chunks, so a microbatch crosses the ring v times and the
// fill/drain costs a chunk's time per stage instead of a whole stage's. Forwards go through the
// chunks in groups of pp microbatches (chunk 0 for mb 0..pp-1, chunk 1 for the same group, ...);
// backwards take the same groups with the chunks reversed.
void build_interleaved(Schedule& s) {
  const int pp = s.pp, v = s.virtual_stages, total = v * s.microbatches, group = pp * v;
  const auto forward_at = [&](int k) { return forward(k / group * pp + k % pp, k % group / pp); };
  const auto backward_at = [&](int k) {
    return backward(k / group * pp + k % pp, v - 1 - k % group / pp);
  };
  for (int stage = 0; stage < pp; ++stage) {
    auto& list = s.stages[stage];
    // Before its first backward (mb 0 on the last chunk) can arrive, stage s sees the first group
    // pass its v-1 lower chunks ((v-1)*pp forwards) and then, for the last chunk, the forward to
    // the last stage and the gradient back: two actions per stage below it.
    const int warmup = std::min((pp - stage - 1) * 2 + (v - 1) * pp, total);
    for (int k = 0; k < warmup; ++k) list.push_back(forward_at(k));
    for (int k = 0; k + warmup < total; ++k) {
      list.push_back(forward_at(k + warmup));
      list.push_back(backward_at(k));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(backward_at(k));
    // The warmup caches plus the steady state's forward taken before its backward frees one.
    s.stated_caches[stage] = std::min(warmup + 1, total);
    for (int chunk = 0; chunk < v; ++chunk) {
      s.stated_chunk_caches[stage][chunk] =
          interleaved_chunk_caches(pp, v, s.microbatches, stage, chunk);
    }
  }
}

// ZB-H1: 1F1B's order with the backward split. The B-input chain that the previous stage waits
// on runs at B's cost alone, and stage s defers each W by s steady steps, so the W's it owes pile
// up exactly when the drain would leave it idle (s+1 of them after its last B-input, matching the
// s+1 steps its last gradient needs to reach stage 0 and that stage's final W). Caches held until
// W: the 1F1B count pp-s plus the s deferred W's, so pp on every stage, the 1F1B peak of stage 0
// (the paper's equal-memory claim). Held until B-input: pp-s, as 1F1B. Gradient sets, held from
// B-input to W: the s deferred W's and the one whose B-input just ran.
void build_zb_h1(Schedule& s) {
  const int m = s.microbatches;
  for (int stage = 0; stage < s.pp; ++stage) {
    auto& list = s.stages[stage];
    const int warmup = std::min(s.pp - stage - 1, m);
    const int lag = stage;
    int weights_done = 0;
    const auto backward_step = [&](int mb) {
      list.push_back(backward_input(mb));
      if (mb - lag >= 0) list.push_back(backward_weight(weights_done++));
    };
    for (int mb = 0; mb < warmup; ++mb) list.push_back(forward(mb));
    for (int i = 0; i + warmup < m; ++i) {
      list.push_back(forward(i + warmup));
      backward_step(i);
    }
    for (int mb = m - warmup; mb < m; ++mb) backward_step(mb);
    while (weights_done < m) list.push_back(backward_weight(weights_done++));
    s.stated_caches[stage] = s.stated_chunk_caches[stage][0] = std::min(s.pp, m);
    s.stated_b_caches[stage] = std::min(s.pp - stage, m);
    s.stated_chunk_grad_sets[stage][0] = stage + 1;
  }
}

// Microbatch by microbatch through every chunk; a forward's cache is free again once it ran.
void build_forward_only(Schedule& s) {
  for (int stage = 0; stage < s.pp; ++stage) {
    auto& list = s.stages[stage];
    for (int mb = 0; mb < s.microbatches; ++mb)
      for (int chunk = 0; chunk < s.virtual_stages; ++chunk) list.push_back(forward(mb, chunk));
    s.stated_caches[stage] = 1;
    s.stated_chunk_caches[stage].assign(s.virtual_stages, 1);
  }
}

}  // namespace

std::string describe(const Action& action) {
  const char* kind = "F";
  switch (action.kind) {
    case ActionKind::kForward:
      kind = "F";
      break;
    case ActionKind::kBackward:
      kind = "B";
      break;
    case ActionKind::kBackwardInput:
      kind = "B-input";
      break;
    case ActionKind::kBackwardWeight:
      kind = "W";
      break;
  }
  return GPT_MSG(kind << "(mb " << action.microbatch << ", chunk " << action.chunk << ")");
}

// The names --schedule takes and messages print, in the enum's order.
constexpr const char* kScheduleNames[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "forward-only"};
static_assert(std::size(kScheduleNames) == static_cast<size_t>(ScheduleKind::kForwardOnly) + 1);

const char* schedule_name(ScheduleKind kind) {
  return kScheduleNames[static_cast<size_t>(kind)];
}

int Schedule::cache_slots(int stage, int chunk) const {
  GPT_CHECK(stage >= 0 && stage < pp && chunk >= 0 && chunk < virtual_stages,
            "no chunk " << chunk << " on stage " << stage << " of " << settings_text(*this));
  return stated_chunk_caches[stage][chunk];
}

int Schedule::grad_sets(int stage, int chunk) const {
  GPT_CHECK(stage >= 0 && stage < pp && chunk >= 0 && chunk < virtual_stages,
            "no chunk " << chunk << " on stage " << stage << " of " << settings_text(*this));
  return stated_chunk_grad_sets[stage][chunk];
}

Schedule make_schedule(ScheduleKind kind, int pp, int microbatches, int virtual_stages) {
  check_settings(kind, pp, microbatches, virtual_stages);
  Schedule s;
  s.kind = kind;
  s.pp = pp;
  s.microbatches = microbatches;
  s.virtual_stages = virtual_stages;
  s.stages.resize(pp);
  s.stated_caches.assign(pp, 0);
  s.stated_b_caches.assign(pp, 0);
  s.stated_chunk_caches.assign(pp, std::vector<int>(virtual_stages, 0));
  // A whole B takes a gradient set and gives it back at its end: one per chunk. ZB-H1 states
  // its own; forward-only takes none.
  const int whole_backward_sets = kind == ScheduleKind::kForwardOnly ? 0 : 1;
  s.stated_chunk_grad_sets.assign(pp, std::vector<int>(virtual_stages, whole_backward_sets));
  switch (kind) {
    case ScheduleKind::kGpipe:
      build_gpipe(s);
      break;
    case ScheduleKind::k1f1b:
      build_1f1b(s);
      break;
    case ScheduleKind::kInterleaved:
      build_interleaved(s);
      break;
    case ScheduleKind::kZbH1:
      build_zb_h1(s);
      break;
    case ScheduleKind::kForwardOnly:
      build_forward_only(s);
      break;
  }
  // Without a split the whole cache goes at B (or, forward-only, right after F).
  if (!s.splits_backward()) s.stated_b_caches = s.stated_caches;
  check_schedule(s);  // cheap, and turns a construction bug into an error instead of a hang
  return s;
}

Schedule make_forward_only_schedule(int pp, int microbatches, int virtual_stages) {
  return make_schedule(ScheduleKind::kForwardOnly, pp, microbatches, virtual_stages);
}

}  // namespace gpt
