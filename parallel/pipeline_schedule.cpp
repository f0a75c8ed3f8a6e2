// The pipeline schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1) built as per-stage action lists,
// the checker that proves them, and the cost replay. The replay is the one engine behind both the
// deadlock proof and the timeline, so what the checker accepts is exactly what simulate() can run.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/check.h"

namespace gpt {
namespace {

std::string settings_text(const Schedule& s) {
  return GPT_MSG("schedule " << s.name << " (pp " << s.pp << ", " << s.microbatches
                             << " microbatches, " << s.virtual_stages << " virtual stages)");
}

void check_settings(const std::string& name, int pp, int m, int v) {
  GPT_INPUT_CHECK(name == "gpipe" || name == "1f1b" || name == "interleaved" || name == "zb-h1",
                  "--schedule " << name << " is not one of gpipe, 1f1b, interleaved, zb-h1");
  GPT_INPUT_CHECK(pp >= 1, "--pp must be at least 1 (got " << pp << ")");
  GPT_INPUT_CHECK(m >= 1,
                  "the microbatches (global batch / (dp x micro batch)) must be at least 1"
                  " (got "
                      << m << ")");
  GPT_INPUT_CHECK(v >= 1, "--virtual-stages must be at least 1 (got " << v << ")");
  if (name != "interleaved") {
    GPT_INPUT_CHECK(v == 1, "--virtual-stages " << v << " needs --schedule interleaved");
  }
  if (name == "interleaved") {
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
  if (name == "zb-h1") {
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
    s.stated_caches[stage] = m;
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
    s.stated_caches[stage] = std::min(s.pp - stage, m);
  }
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
  }
}

// ZB-H1: 1F1B's order with the backward split. The B-input chain that the previous stage waits
// on runs at B's cost alone, and stage s defers each W by s steady steps, so the W's it owes pile
// up exactly when the drain would leave it idle (s+1 of them after its last B-input, matching the
// s+1 steps its last gradient needs to reach stage 0 and that stage's final W). Caches held until
// W: the 1F1B count pp-s plus the s deferred W's, so pp on every stage, the 1F1B peak of stage 0
// (the paper's equal-memory claim). Held until B-input: pp-s, as 1F1B.
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
    s.stated_caches[stage] = std::min(s.pp, m);
    s.stated_b_caches[stage] = std::min(s.pp - stage, m);
  }
}

bool is_backward_input(ActionKind k) {
  return k == ActionKind::kBackward || k == ActionKind::kBackwardInput;
}

// Lists must be shaped for the settings and name only owned microbatches and chunks before the
// replay may index by them.
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

struct CachePeaks {
  std::vector<int> caches, b_caches;
};

// Counted in list order: a stage runs its list in order, so timing cannot change these peaks.
CachePeaks count_caches(const Schedule& s) {
  CachePeaks peaks{std::vector<int>(s.pp, 0), std::vector<int>(s.pp, 0)};
  for (int stage = 0; stage < s.pp; ++stage) {
    int held = 0, b_held = 0;
    for (const Action& a : s.stages[stage]) {
      switch (a.kind) {
        case ActionKind::kForward:
          peaks.caches[stage] = std::max(peaks.caches[stage], ++held);
          peaks.b_caches[stage] = std::max(peaks.b_caches[stage], ++b_held);
          break;
        case ActionKind::kBackward:
          --held;
          --b_held;
          break;
        case ActionKind::kBackwardInput:
          --b_held;
          break;
        case ActionKind::kBackwardWeight:
          --held;
          break;
      }
    }
  }
  return peaks;
}

// Runs the lists as the executor would with every send posted without waiting: a stage's next
// action starts once the stage is free and each input has arrived (its producer's end, plus comm
// when the producer is another stage). Each pass over the stages runs whatever became ready, so a
// pass that runs nothing with actions left is a true stall, whatever the costs.
class Replay {
 public:
  Replay(const Schedule& s, const ActionCosts& costs)
      : s_(s),
        costs_(costs),
        slots_(static_cast<size_t>(s.pp) * s.virtual_stages * s.microbatches),
        forward_end_(slots_, -1),
        input_grad_end_(slots_, -1),
        next_(s.pp, 0),
        free_at_(s.pp, 0) {}

  // Returns false on a stall, leaving next_ at each stage's blocked action.
  bool run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int stage = 0; stage < s_.pp; ++stage) {
        while (next_[stage] < s_.stages[stage].size() && try_run(stage)) progress = true;
      }
    }
    for (int stage = 0; stage < s_.pp; ++stage) {
      if (next_[stage] < s_.stages[stage].size()) return false;
    }
    return true;
  }

  std::string stall_report() const {
    std::ostringstream out;
    out << settings_text(s_) << " stalls:";
    const char* sep = " ";
    for (int stage = 0; stage < s_.pp; ++stage) {
      const auto& list = s_.stages[stage];
      if (next_[stage] >= list.size()) continue;
      const Action& a = list[next_[stage]];
      out << sep << "stage " << stage << " waits at " << describe(a) << " (action "
          << next_[stage] + 1 << " of " << list.size() << ") for " << missing_input(stage, a);
      sep = "; ";
    }
    return out.str();
  }

  const std::vector<TimedAction>& placed() const { return placed_; }

 private:
  struct Input {
    double end;  // -1 until the producer ran
    int stage;
    Action producer;
  };

  size_t slot(int vs, int mb) const {
    return static_cast<size_t>(vs) * s_.microbatches + static_cast<size_t>(mb);
  }
  int stage_of(int vs) const { return vs % s_.pp; }
  int chunk_of(int vs) const { return vs / s_.pp; }

  // The inputs `a` on `stage` waits for: at most two.
  std::vector<Input> inputs(int stage, const Action& a) const {
    const int vs = virtual_stage(s_.pp, stage, a.chunk), mb = a.microbatch;
    const int last_vs = s_.pp * s_.virtual_stages - 1;
    std::vector<Input> in;
    if (a.kind == ActionKind::kForward) {
      if (vs > 0) {
        in.push_back(
            {forward_end_[slot(vs - 1, mb)], stage_of(vs - 1), forward(mb, chunk_of(vs - 1))});
      }
    } else if (is_backward_input(a.kind)) {
      in.push_back({forward_end_[slot(vs, mb)], stage, forward(mb, a.chunk)});
      if (vs < last_vs) {
        in.push_back({input_grad_end_[slot(vs + 1, mb)], stage_of(vs + 1),
                      Action{a.kind, mb, chunk_of(vs + 1)}});
      }
    } else {
      in.push_back(
          {input_grad_end_[slot(vs, mb)], stage, Action{ActionKind::kBackwardInput, mb, a.chunk}});
    }
    return in;
  }

  std::string missing_input(int stage, const Action& a) const {
    for (const Input& in : inputs(stage, a)) {
      if (in.end < 0) return GPT_MSG(describe(in.producer) << " on stage " << in.stage);
    }
    return "nothing";  // unreachable for a blocked action
  }

  double cost(ActionKind k) const {
    switch (k) {
      case ActionKind::kForward:
        return costs_.forward;
      case ActionKind::kBackward:
        return costs_.backward_input + costs_.backward_weight;
      case ActionKind::kBackwardInput:
        return costs_.backward_input;
      case ActionKind::kBackwardWeight:
        return costs_.backward_weight;
    }
    return 0;
  }

  bool try_run(int stage) {
    const Action& a = s_.stages[stage][next_[stage]];
    double start = free_at_[stage];
    for (const Input& in : inputs(stage, a)) {
      if (in.end < 0) return false;
      start = std::max(start, in.end + (in.stage == stage ? 0.0 : costs_.comm));
    }
    const double end = start + cost(a.kind);
    const size_t at = slot(virtual_stage(s_.pp, stage, a.chunk), a.microbatch);
    if (a.kind == ActionKind::kForward) forward_end_[at] = end;
    if (is_backward_input(a.kind)) input_grad_end_[at] = end;
    placed_.push_back({a, stage, start, end});
    free_at_[stage] = end;
    ++next_[stage];
    return true;
  }

  const Schedule& s_;
  ActionCosts costs_;
  size_t slots_;
  std::vector<double> forward_end_, input_grad_end_;
  std::vector<size_t> next_;
  std::vector<double> free_at_;
  std::vector<TimedAction> placed_;
};

// Each (microbatch, chunk) of a stage: one F, and one B or one B-input plus one W; and the
// same-stage order (F before its backward, B-input before W), which the replay would only report
// as a stall.
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
        const std::string where = GPT_MSG(settings_text(s) << ": stage " << stage << " has ");
        const std::string what = GPT_MSG("mb " << mb << ", chunk " << chunk);
        GPT_INPUT_CHECK(has(ActionKind::kForward), where << "no F(" << what << ")");
        const bool full = has(ActionKind::kBackward);
        const bool split = has(ActionKind::kBackwardInput) || has(ActionKind::kBackwardWeight);
        GPT_INPUT_CHECK(!(full && split),
                        where << "both B and B-input/W for " << what << "; use one or the other");
        GPT_INPUT_CHECK(full || split, where << "no backward for " << what);
        if (split) {
          GPT_INPUT_CHECK(has(ActionKind::kBackwardInput),
                          where << "W but no B-input for " << what);
          GPT_INPUT_CHECK(has(ActionKind::kBackwardWeight),
                          where << "B-input but no W for " << what);
          GPT_INPUT_CHECK(pos(ActionKind::kBackwardInput) < pos(ActionKind::kBackwardWeight),
                          where << "W before B-input for " << what);
        }
        const ActionKind b = full ? ActionKind::kBackward : ActionKind::kBackwardInput;
        GPT_INPUT_CHECK(pos(ActionKind::kForward) < pos(b),
                        where << "the backward before the forward for " << what);
      }
    }
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

Schedule make_schedule(const std::string& name, int pp, int microbatches, int virtual_stages) {
  check_settings(name, pp, microbatches, virtual_stages);
  Schedule s;
  s.name = name;
  s.pp = pp;
  s.microbatches = microbatches;
  s.virtual_stages = virtual_stages;
  s.stages.resize(pp);
  s.stated_caches.assign(pp, 0);
  s.stated_b_caches.assign(pp, 0);
  if (name == "gpipe") build_gpipe(s);
  if (name == "1f1b") build_1f1b(s);
  if (name == "interleaved") build_interleaved(s);
  if (name == "zb-h1") {
    build_zb_h1(s);
  } else {
    s.stated_b_caches = s.stated_caches;  // without a split the whole cache goes at B
  }
  check_schedule(s);  // cheap, and turns a construction bug into an error instead of a hang
  return s;
}

void check_schedule(const Schedule& s) {
  check_shape(s);
  GPT_INPUT_CHECK(s.stated_caches.size() == static_cast<size_t>(s.pp) &&
                      s.stated_b_caches.size() == static_cast<size_t>(s.pp),
                  settings_text(s) << ": states caches for " << s.stated_caches.size() << " and "
                                   << s.stated_b_caches.size() << " stages, not " << s.pp);
  check_actions(s);
  Replay replay(s, ActionCosts{});
  GPT_INPUT_CHECK(replay.run(), replay.stall_report());
  const CachePeaks peaks = count_caches(s);
  for (int stage = 0; stage < s.pp; ++stage) {
    GPT_INPUT_CHECK(peaks.caches[stage] == s.stated_caches[stage],
                    settings_text(s)
                        << ": stage " << stage << " holds up to " << peaks.caches[stage]
                        << " forward caches, stated " << s.stated_caches[stage]);
    GPT_INPUT_CHECK(peaks.b_caches[stage] == s.stated_b_caches[stage],
                    settings_text(s)
                        << ": stage " << stage << " holds up to " << peaks.b_caches[stage]
                        << " forward caches before their B, stated " << s.stated_b_caches[stage]);
  }
}

namespace {

// One message the executor posts: (microbatch, receiving virtual stage, gradient?).
using Message = std::tuple<int, int, bool>;

// Per ordered pair (from, to): the messages `from` sends in its list order, and those `to`
// receives from `from` in its list order. The rules mirror PipelineExecutor::run: F receives
// its input from vs - 1 and sends its output to vs + 1; B (or B-input) receives its output
// gradient from vs + 1 and sends its input gradient to vs - 1; W moves nothing.
bool orders_match(const Schedule& s, bool forward_only) {
  const int last_vs = s.pp * s.virtual_stages - 1;
  std::map<std::pair<int, int>, std::vector<Message>> sent, received;
  for (int stage = 0; stage < s.pp; ++stage) {
    for (const Action& a : s.stages[static_cast<size_t>(stage)]) {
      const int vs = virtual_stage(s.pp, stage, a.chunk);
      if (a.kind == ActionKind::kForward) {
        if (vs > 0) received[{(vs - 1) % s.pp, stage}].emplace_back(a.microbatch, vs, false);
        if (vs < last_vs) sent[{stage, (vs + 1) % s.pp}].emplace_back(a.microbatch, vs + 1, false);
      } else if (!forward_only && a.kind != ActionKind::kBackwardWeight) {
        if (vs < last_vs) received[{(vs + 1) % s.pp, stage}].emplace_back(a.microbatch, vs, true);
        if (vs > 0) sent[{stage, (vs - 1) % s.pp}].emplace_back(a.microbatch, vs - 1, true);
      }
    }
  }
  return sent == received;
}

}  // namespace

bool transfers_match_in_order(const Schedule& s) {
  return orders_match(s, false) && orders_match(s, true);
}

Timeline simulate(const Schedule& s, const ActionCosts& costs) {
  check_shape(s);
  Replay replay(s, costs);
  GPT_INPUT_CHECK(replay.run(), replay.stall_report());
  Timeline t;
  t.actions = replay.placed();
  double busy = 0;
  for (const TimedAction& a : t.actions) {
    t.makespan = std::max(t.makespan, a.end);
    busy += a.end - a.start;
  }
  const double capacity = s.pp * t.makespan;
  t.bubble_fraction = capacity > 0 ? (capacity - busy) / capacity : 0;
  t.peak_caches = count_caches(s).caches;
  return t;
}

double theoretical_bubble(const std::string& name, int pp, int m, int v) {
  check_settings(name, pp, m, v);
  const double fill = pp - 1;
  // The fill and drain last pp-1 action slots; the steady work is m microbatches of F+B, v*m
  // chunk-sized ones for interleaved, and 3m single passes for ZB-H1 where W fills the drain.
  double work = m;
  if (name == "interleaved") work = static_cast<double>(v) * m;
  if (name == "zb-h1") work = 3.0 * m;
  return fill / (work + fill);
}

}  // namespace gpt
