// The pipeline schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1, forward-only) built as per-stage
// action lists with their stated counts, the checker that proves them, and the cost replay. The
// replay is the one engine behind both the deadlock proof and the timeline, so what the checker
// accepts is exactly what simulate() can run.
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

namespace gpt {
namespace {

std::string settings_text(const Schedule& s) {
  return GPT_MSG("schedule " << schedule_name(s.kind) << " (pp " << s.pp << ", " << s.microbatches
                             << " microbatches, " << s.virtual_stages << " virtual stages)");
}

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

// What the lists hold at most, counted in list order: a stage runs its list in order, so timing
// cannot change these peaks. Laid out as Schedule's stated counts.
struct Peaks {
  std::vector<int> caches, b_caches;
  std::vector<std::vector<int>> chunk_caches, chunk_grad_sets;
};

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

// A send an action must see received before it starts: the previous send from the buffer (cache
// slot or gradient set) the action takes, which the executor completes before overwriting it.
// Named by its receiver: the forward (activation) or backward input half (gradient) of
// `microbatch` on virtual stage `vs`.
struct PendingSend {
  bool gradient = false;
  int vs = 0, microbatch = 0;
};

// The sends each action of each stage waits for, in list order: the executor's pools (per chunk,
// as many cache slots and gradient sets as the schedule states, the last freed taken first)
// played through the list, which alone decides which buffer each action takes.
std::vector<std::vector<std::optional<PendingSend>>> pending_sends(const Schedule& s) {
  std::vector<std::vector<std::optional<PendingSend>>> waits(s.pp);
  const int last_vs = s.pp * s.virtual_stages - 1;
  for (int stage = 0; stage < s.pp; ++stage) {
    struct Pool {
      std::vector<int> free;
      std::vector<std::optional<PendingSend>> sends;
      explicit Pool(int size) : sends(static_cast<size_t>(size)) {
        for (int i = size - 1; i >= 0; --i) free.push_back(i);
      }
      int take(std::optional<PendingSend>& waits_for) {
        if (free.empty()) {  // more than stated: check_schedule reports it after the replay
          free.push_back(static_cast<int>(sends.size()));
          sends.emplace_back();
        }
        const int i = free.back();
        free.pop_back();
        waits_for = sends[static_cast<size_t>(i)];
        sends[static_cast<size_t>(i)].reset();
        return i;
      }
    };
    std::vector<Pool> slots, sets;
    for (int c = 0; c < s.virtual_stages; ++c) {
      slots.emplace_back(s.stated_chunk_caches[stage][c]);
      sets.emplace_back(s.stated_chunk_grad_sets[stage][c]);
    }
    std::map<std::pair<int, int>, int> slot_of, set_of;  // (microbatch, chunk) -> index
    for (const Action& a : s.stages[stage]) {
      const int vs = virtual_stage(s.pp, stage, a.chunk);
      const std::pair<int, int> key{a.microbatch, a.chunk};
      std::optional<PendingSend>& waits_for = waits[stage].emplace_back();
      const auto finish = [&] {
        sets[a.chunk].free.push_back(set_of.at(key));
        slots[a.chunk].free.push_back(slot_of.at(key));
        set_of.erase(key);
        slot_of.erase(key);
      };
      if (a.kind == ActionKind::kForward) {
        const int slot = slots[a.chunk].take(waits_for);
        if (vs < last_vs) slots[a.chunk].sends[slot] = PendingSend{false, vs + 1, a.microbatch};
        if (s.kind == ScheduleKind::kForwardOnly) {
          slots[a.chunk].free.push_back(slot);
        } else {
          slot_of[key] = slot;
        }
      } else if (is_backward_input(a.kind)) {
        const int set = sets[a.chunk].take(waits_for);
        if (vs > 0) sets[a.chunk].sends[set] = PendingSend{true, vs - 1, a.microbatch};
        set_of[key] = set;
        if (a.kind == ActionKind::kBackward) finish();
      } else {
        finish();
      }
    }
  }
  return waits;
}

// Runs the lists as the executor would: a stage's next action starts once the stage is free, each
// input has arrived (its producer's end, or a full backward's input half, plus comm when the
// producer is another stage) and, with costs.rendezvous, the previous send from the buffer it
// takes has been received: a send completes once its receiver is there to take it (the receiving
// action's stage done with the action before and with its own buffer's wait, as the executor
// takes the buffer before it receives; the message itself has been under way since it was
// posted), as NCCL's and MPI's above their eager limit do. Each pass over the stages runs
// whatever became ready, so a pass that runs nothing with actions left is a true stall, whatever
// the costs.
class Replay {
 public:
  Replay(const Schedule& s, const ActionCosts& costs, std::vector<PassCosts> per_vs = {})
      : s_(s),
        costs_(costs),
        per_vs_(std::move(per_vs)),
        slots_(static_cast<size_t>(s.pp) * s.virtual_stages * s.microbatches),
        forward_end_(slots_, -1),
        input_grad_end_(slots_, -1),
        forward_ready_(slots_, -1),
        input_grad_ready_(slots_, -1),
        pending_(pending_sends(s)),
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
    if (costs_.rendezvous && send_received(stage) < 0) {
      const PendingSend& send = *pending_[stage][next_[stage]];
      const Action receiver{send.gradient ? ActionKind::kBackwardInput : ActionKind::kForward,
                            send.microbatch, chunk_of(send.vs)};
      return GPT_MSG("its buffer's send to be received by " << describe(receiver) << " on stage "
                                                            << stage_of(send.vs));
    }
    return "nothing";  // unreachable for a blocked action
  }

  double cost(ActionKind k, int vs) const {
    const PassCosts c =
        per_vs_.empty() ? PassCosts{costs_.forward, costs_.backward_input, costs_.backward_weight}
                        : per_vs_[static_cast<size_t>(vs)];
    switch (k) {
      case ActionKind::kForward:
        return c.forward;
      case ActionKind::kBackward:
        return c.backward_input + c.backward_weight;
      case ActionKind::kBackwardInput:
        return c.backward_input;
      case ActionKind::kBackwardWeight:
        return c.backward_weight;
    }
    return 0;
  }

  // When the send the next action on `stage` waits for was received; -1 while its receiver has
  // not been placed, 0 when it waits for none.
  double send_received(int stage) const {
    const std::optional<PendingSend>& send = pending_[stage][next_[stage]];
    if (!send) return 0;
    const size_t at = slot(send->vs, send->microbatch);
    return send->gradient ? input_grad_ready_[at] : forward_ready_[at];
  }

  bool try_run(int stage) {
    const Action& a = s_.stages[stage][next_[stage]];
    const double received = costs_.rendezvous ? send_received(stage) : 0;
    if (received < 0) return false;
    const double ready = std::max(free_at_[stage], received);  // to receive its input
    double start = ready;
    for (const Input& in : inputs(stage, a)) {
      if (in.end < 0) return false;
      start = std::max(start, in.end + (in.stage == stage ? 0.0 : costs_.comm));
    }
    const int vs = virtual_stage(s_.pp, stage, a.chunk);
    const double end = start + cost(a.kind, vs);
    const size_t at = slot(vs, a.microbatch);
    if (a.kind == ActionKind::kForward) forward_end_[at] = end, forward_ready_[at] = ready;
    // A full backward sends its input gradient after its input half, as the executor does, and
    // runs the weight half while the gradient is on its way.
    if (is_backward_input(a.kind)) {
      input_grad_end_[at] = start + cost(ActionKind::kBackwardInput, vs);
      input_grad_ready_[at] = ready;
    }
    placed_.push_back({a, stage, start, end});
    free_at_[stage] = end;
    ++next_[stage];
    return true;
  }

  const Schedule& s_;
  ActionCosts costs_;
  std::vector<PassCosts> per_vs_;  // empty: costs_'s uniform pass costs
  size_t slots_;
  // When each receiving action was ready to receive (its stage free, its own buffer taken).
  std::vector<double> forward_end_, input_grad_end_, forward_ready_, input_grad_ready_;
  std::vector<std::vector<std::optional<PendingSend>>> pending_;  // pending_sends(s_)
  std::vector<size_t> next_;
  std::vector<double> free_at_;
  std::vector<TimedAction> placed_;
};

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
        const std::string where = GPT_MSG(settings_text(s) << ": stage " << stage << " has ");
        const std::string what = GPT_MSG("mb " << mb << ", chunk " << chunk);
        GPT_INPUT_CHECK(has(ActionKind::kForward), where << "no F(" << what << ")");
        const bool full = has(ActionKind::kBackward);
        const bool split = has(ActionKind::kBackwardInput) || has(ActionKind::kBackwardWeight);
        if (s.kind == ScheduleKind::kForwardOnly) {
          GPT_INPUT_CHECK(!full && !split, where << "a backward for " << what);
          continue;
        }
        GPT_INPUT_CHECK(!(full && split),
                        where << "both B and B-input/W for " << what << "; use one or the other");
        GPT_INPUT_CHECK(full || split, where << "no backward for " << what);
        GPT_INPUT_CHECK(split == s.splits_backward(),
                        where << (split ? "B-input/W" : "B") << " for " << what << ", but "
                              << schedule_name(s.kind)
                              << (split ? " runs whole backwards" : " splits its backwards"));
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

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGpipe:
      return "gpipe";
    case ScheduleKind::k1f1b:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZbH1:
      return "zb-h1";
    case ScheduleKind::kForwardOnly:
      return "forward-only";
  }
  return "?";
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

void check_schedule(const Schedule& s) {
  check_shape(s);
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
  Replay replay(s, ActionCosts{});
  GPT_INPUT_CHECK(replay.run(), replay.stall_report());
  const Peaks peaks = count_peaks(s);
  for (int stage = 0; stage < s.pp; ++stage) {
    const std::string where = GPT_MSG(settings_text(s) << ": stage " << stage);
    GPT_INPUT_CHECK(peaks.caches[stage] == s.stated_caches[stage],
                    where << " holds up to " << peaks.caches[stage] << " forward caches, stated "
                          << s.stated_caches[stage]);
    GPT_INPUT_CHECK(peaks.b_caches[stage] == s.stated_b_caches[stage],
                    where << " holds up to " << peaks.b_caches[stage]
                          << " forward caches before their B, stated " << s.stated_b_caches[stage]);
    for (int chunk = 0; chunk < s.virtual_stages; ++chunk) {
      const int caches = peaks.chunk_caches[stage][chunk];
      const int sets = peaks.chunk_grad_sets[stage][chunk];
      GPT_INPUT_CHECK(caches == s.cache_slots(stage, chunk),
                      where << " chunk " << chunk << " holds up to " << caches
                            << " forward caches, stated " << s.cache_slots(stage, chunk));
      GPT_INPUT_CHECK(sets == s.grad_sets(stage, chunk),
                      where << " chunk " << chunk << " holds up to " << sets
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

Timeline simulate(const Schedule& s, const ActionCosts& costs) {
  return simulate(s, costs, {});
}

Timeline simulate(const Schedule& s, const ActionCosts& costs,
                  const std::vector<PassCosts>& per_virtual_stage) {
  check_shape(s);
  GPT_CHECK(per_virtual_stage.empty() ||
                per_virtual_stage.size() == static_cast<size_t>(s.pp) * s.virtual_stages,
            "costs for " << per_virtual_stage.size() << " virtual stages, but " << settings_text(s)
                         << " has " << s.pp * s.virtual_stages);
  Replay replay(s, costs, per_virtual_stage);
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
  t.peak_caches = count_peaks(s).caches;
  return t;
}

double theoretical_bubble(ScheduleKind kind, int pp, int m, int v) {
  check_settings(kind, pp, m, v);
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

}  // namespace gpt
