// The cost replay of pipeline schedules (simulate in pipeline_schedule.h): each stage runs its
// list in order, each action as soon as its inputs have arrived and the buffer it takes is free,
// as the executor runs them. The one engine behind both the checker's deadlock proof and the
// timelines the trainer's bubble figure and the planner price.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "parallel/schedule_internal.h"

namespace gpt {
namespace {

using schedule_detail::is_backward_input;
using schedule_detail::settings_text;

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
    // (chunk, microbatch) -> the slot and set it holds; check_actions proved each taken once.
    std::vector<int> slot_of(static_cast<size_t>(s.virtual_stages) * s.microbatches, -1);
    std::vector<int> set_of(slot_of.size(), -1);
    for (const Action& a : s.stages[stage]) {
      const int vs = virtual_stage(s.pp, stage, a.chunk);
      const size_t key = static_cast<size_t>(a.chunk) * s.microbatches + a.microbatch;
      std::optional<PendingSend>& waits_for = waits[stage].emplace_back();
      const auto finish = [&] {
        sets[a.chunk].free.push_back(set_of[key]);
        slots[a.chunk].free.push_back(slot_of[key]);
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
        free_at_(s.pp, 0) {
    size_t actions = 0;
    for (const auto& list : s.stages) actions += list.size();
    placed_.reserve(actions);
  }

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

  std::vector<TimedAction> take_placed() { return std::move(placed_); }

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

  // The inputs `a` on `stage` waits for: at most two (a fixed array: this runs for every action
  // of every replay the planner makes).
  struct Inputs {
    std::array<Input, 2> at;
    size_t count = 0;
    void push_back(const Input& in) { at[count++] = in; }
    const Input* begin() const { return at.data(); }
    const Input* end() const { return at.data() + count; }
  };
  Inputs inputs(int stage, const Action& a) const {
    const int vs = virtual_stage(s_.pp, stage, a.chunk), mb = a.microbatch;
    const int last_vs = s_.pp * s_.virtual_stages - 1;
    Inputs in;
    if (a.kind == ActionKind::kForward) {
      if (vs > 0) {
        in.push_back({forward_end_[slot(vs - 1, mb)], stage_of(vs - 1),
                      Action{ActionKind::kForward, mb, chunk_of(vs - 1)}});
      }
    } else if (is_backward_input(a.kind)) {
      in.push_back({forward_end_[slot(vs, mb)], stage, Action{ActionKind::kForward, mb, a.chunk}});
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

}  // namespace

std::string schedule_detail::find_stall(const Schedule& s) {
  Replay replay(s, ActionCosts{});
  return replay.run() ? std::string() : replay.stall_report();
}

Timeline simulate(const Schedule& s, const ActionCosts& costs) {
  return simulate(s, costs, {});
}

Timeline simulate(const Schedule& s, const ActionCosts& costs,
                  const std::vector<PassCosts>& per_virtual_stage) {
  schedule_detail::check_shape(s);
  GPT_CHECK(per_virtual_stage.empty() ||
                per_virtual_stage.size() == static_cast<size_t>(s.pp) * s.virtual_stages,
            "costs for " << per_virtual_stage.size() << " virtual stages, but " << settings_text(s)
                         << " has " << s.pp * s.virtual_stages);
  Replay replay(s, costs, per_virtual_stage);
  GPT_INPUT_CHECK(replay.run(), replay.stall_report());
  Timeline t;
  t.actions = replay.take_placed();
  double busy = 0;
  for (const TimedAction& a : t.actions) {
    t.makespan = std::max(t.makespan, a.end);
    busy += a.end - a.start;
  }
  const double capacity = s.pp * t.makespan;
  t.bubble_fraction = capacity > 0 ? (capacity - busy) / capacity : 0;
  t.peak_caches = schedule_detail::count_peaks(s).caches;
  return t;
}

}  // namespace gpt
