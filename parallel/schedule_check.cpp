// The checker of pipeline schedules (see check_schedule in pipeline_schedule.h): the lists' shape,
// every action once and in its stage's order, no stall when run, and the stated counts equal to
// the peaks the lists hold; and whether two stages exchange messages in the same order.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cstddef>
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

void check_shape(const Schedule& s) {
  GPT_INPUT_CHECK(s.pp >= 1 && s.microbatches >= 1 && s.virtual_stages >= 1,
                  settings_text(s) << ": pp, microbatches and virtual stages must be positive");
  GPT_INPUT_CHECK(s.stages.size() == static_cast<size_t>(s.pp),
                  settings_text(s) << ": has " << s.stages.size() << " stage lists, not " << s.pp);
  for (int stage = 0; stage < s.pp; ++stage) {
    for (const Action& a : s.stages[stage]) {
      GPT_INPUT_CHECK(a.microbatch >= 0 && a.microbatch < s.microbatches && a.chunk >= 0 &&
                          a.chunk < s.virtual_stages,
                      settings_text(s) << ": stage " << stage << " names " << describe(a)
                                       << ", outside its microbatches or chunks");
    }
  }
}

Peaks count_peaks(const Schedule& s) {
  const auto per_chunk = [&] {
    return std::vector<std::vector<int>>(s.pp, std::vector<int>(s.virtual_stages, 0));
  };
  Peaks peaks{std::vector<int>(s.pp, 0), std::vector<int>(s.pp, 0), per_chunk(), per_chunk()};
  const auto take = [](int& held, int& peak) { peak = std::max(peak, ++held); };
  for (int stage = 0; stage < s.pp; ++stage) {
    int held = 0, b_held = 0;
    std::vector<int> chunk_held(s.virtual_stages, 0), sets_held(s.virtual_stages, 0);
    for (const Action& a : s.stages[stage]) {
      int& chunk = chunk_held[a.chunk];
      int& sets = sets_held[a.chunk];
      switch (a.kind) {
        case ActionKind::kForward:
          take(held, peaks.caches[stage]);
          take(b_held, peaks.b_caches[stage]);
          take(chunk, peaks.chunk_caches[stage][a.chunk]);
          if (s.kind == ScheduleKind::kForwardOnly) --held, --b_held, --chunk;
          break;
        case ActionKind::kBackward:
          take(sets, peaks.chunk_grad_sets[stage][a.chunk]);
          --sets, --held, --b_held, --chunk;
          break;
        case ActionKind::kBackwardInput:
          take(sets, peaks.chunk_grad_sets[stage][a.chunk]);
          --b_held;
          break;
        case ActionKind::kBackwardWeight:
          --sets, --held, --chunk;
          break;
      }
    }
  }
  return peaks;
}

}  // namespace schedule_detail

namespace {

using schedule_detail::settings_text;

// Each (microbatch, chunk) of a stage: one F, and one B, or one B-input plus one W where the
// schedule splits its backwards, or nothing more in a forward-only schedule; and the same-stage
// order (F before its backward, B-input before W), which the replay would only report as a stall.
void check_actions(const Schedule& s) {
  const size_t per_stage = static_cast<size_t>(s.virtual_stages) * s.microbatches;
  for (int stage = 0; stage < s.pp; ++stage) {
    constexpr int kKinds = 4;
    std::vector<int> count(per_stage * kKinds, 0);
    std::vector<int> first(per_stage * kKinds, -1);
    const auto& list = s.stages[stage];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const size_t at = (static_cast<size_t>(a.chunk) * s.microbatches + a.microbatch) * kKinds +
                        static_cast<size_t>(a.kind);
      if (count[at]++ == 0) first[at] = static_cast<int>(i);
      GPT_INPUT_CHECK(count[at] == 1, settings_text(s) << ": stage " << stage << " runs "
                                                       << describe(a) << " twice (actions "
                                                       << first[at] + 1 << " and " << i + 1 << ")");
    }
    for (int chunk = 0; chunk < s.virtual_stages; ++chunk) {
      for (int mb = 0; mb < s.microbatches; ++mb) {
        const size_t base = (static_cast<size_t>(chunk) * s.microbatches + mb) * kKinds;
        const auto has = [&](ActionKind k) { return count[base + static_cast<size_t>(k)] == 1; };
        const auto pos = [&](ActionKind k) { return first[base + static_cast<size_t>(k)]; };
        // Messages are built only for a failing rule: this loop runs over every action of every
        // schedule the planner prices.
        const auto where = [&] {
          return GPT_MSG(settings_text(s) << ": stage " << stage << " has ");
        };
        const auto what = [&] { return GPT_MSG("mb " << mb << ", chunk " << chunk); };
        GPT_INPUT_CHECK(has(ActionKind::kForward), where() << "no F(" << what() << ")");
        const bool full = has(ActionKind::kBackward);
        const bool split = has(ActionKind::kBackwardInput) || has(ActionKind::kBackwardWeight);
        if (s.kind == ScheduleKind::kForwardOnly) {
          GPT_INPUT_CHECK(!full && !split, where() << "a backward for " << what());
          continue;
        }
        GPT_INPUT_CHECK(!(full && split), where() << "both B and B-input/W for " << what()
                                                  << "; use one or the other");
        GPT_INPUT_CHECK(full || split, where() << "no backward for " << what());
        GPT_INPUT_CHECK(split == s.splits_backward(),
                        where() << (split ? "B-input/W" : "B") << " for " << what() << ", but "
                                << schedule_name(s.kind)
                                << (split ? " runs whole backwards" : " splits its backwards"));
        if (split) {
          GPT_INPUT_CHECK(has(ActionKind::kBackwardInput),
                          where() << "W but no B-input for " << what());
          GPT_INPUT_CHECK(has(ActionKind::kBackwardWeight),
                          where() << "B-input but no W for " << what());
          GPT_INPUT_CHECK(pos(ActionKind::kBackwardInput) < pos(ActionKind::kBackwardWeight),
                          where() << "W before B-input for " << what());
        }
        const ActionKind b = full ? ActionKind::kBackward : ActionKind::kBackwardInput;
        GPT_INPUT_CHECK(pos(ActionKind::kForward) < pos(b),
                        where() << "the backward before the forward for " << what());
      }
    }
  }
}

}  // namespace

void check_schedule(const Schedule& s) {
  schedule_detail::check_shape(s);
  const auto per_chunk = [&](const std::vector<std::vector<int>>& counts) {
    return counts.size() == static_cast<size_t>(s.pp) &&
           std::all_of(counts.begin(), counts.end(), [&](const std::vector<int>& stage) {
             return stage.size() == static_cast<size_t>(s.virtual_stages);
           });
  };
  GPT_INPUT_CHECK(s.stated_caches.size() == static_cast<size_t>(s.pp) &&
                      s.stated_b_caches.size() == static_cast<size_t>(s.pp) &&
                      per_chunk(s.stated_chunk_caches) && per_chunk(s.stated_chunk_grad_sets),
                  settings_text(s) << ": states counts for another number of stages or chunks");
  check_actions(s);
  const std::string stall = schedule_detail::find_stall(s);
  GPT_INPUT_CHECK(stall.empty(), stall);
  const schedule_detail::Peaks peaks = schedule_detail::count_peaks(s);
  for (int stage = 0; stage < s.pp; ++stage) {
    const auto where = [&] { return GPT_MSG(settings_text(s) << ": stage " << stage); };
    GPT_INPUT_CHECK(peaks.caches[stage] == s.stated_caches[stage],
                    where() << " holds up to " << peaks.caches[stage] << " forward caches, stated "
                            << s.stated_caches[stage]);
    GPT_INPUT_CHECK(peaks.b_caches[stage] == s.stated_b_caches[stage],
                    where() << " holds up to " << peaks.b_caches[stage]
                            << " forward caches before their B, stated "
                            << s.stated_b_caches[stage]);
    for (int chunk = 0; chunk < s.virtual_stages; ++chunk) {
      const int caches = peaks.chunk_caches[stage][chunk];
      const int sets = peaks.chunk_grad_sets[stage][chunk];
      GPT_INPUT_CHECK(caches == s.cache_slots(stage, chunk),
                      where() << " chunk " << chunk << " holds up to " << caches
                              << " forward caches, stated " << s.cache_slots(stage, chunk));
      GPT_INPUT_CHECK(sets == s.grad_sets(stage, chunk),
                      where() << " chunk " << chunk << " holds up to " << sets
                              << " gradient sets, stated " << s.grad_sets(stage, chunk));
    }
  }
}

// Per ordered pair (from, to): the messages `from` sends in its list order, and those `to`
// receives from `from` in its list order. The rules mirror PipelineExecutor::run: F receives
// its input from vs - 1 and sends its output to vs + 1; B (or B-input) receives its output
// gradient from vs + 1 and sends its input gradient to vs - 1; W moves nothing.
bool transfers_match_in_order(const Schedule& s) {
  using Message = std::tuple<int, int, bool>;  // (microbatch, receiving virtual stage, gradient?)
  const int last_vs = s.pp * s.virtual_stages - 1;
  std::map<std::pair<int, int>, std::vector<Message>> sent, received;
  for (int stage = 0; stage < s.pp; ++stage) {
    for (const Action& a : s.stages[static_cast<size_t>(stage)]) {
      const int vs = virtual_stage(s.pp, stage, a.chunk);
      if (a.kind == ActionKind::kForward) {
        if (vs > 0) received[{(vs - 1) % s.pp, stage}].emplace_back(a.microbatch, vs, false);
        if (vs < last_vs) sent[{stage, (vs + 1) % s.pp}].emplace_back(a.microbatch, vs + 1, false);
      } else if (a.kind != ActionKind::kBackwardWeight) {
        if (vs < last_vs) received[{(vs + 1) % s.pp, stage}].emplace_back(a.microbatch, vs, true);
        if (vs > 0) sent[{stage, (vs - 1) % s.pp}].emplace_back(a.microbatch, vs - 1, true);
      }
    }
  }
  return sent == received;
}

}  // namespace gpt
