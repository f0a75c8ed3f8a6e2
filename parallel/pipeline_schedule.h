// Pipeline schedules as data (DESIGN.md "Pipeline schedules are data"): GPipe, 1F1B, interleaved
// 1F1B and ZB-H1 as one ordered action list per stage, a checker that proves a list set valid
// (each action once, dependencies satisfiable, no deadlock, the stated cache count), and a replay
// with per-action costs that gives the timeline and bubble the planner and tests rely on.
// No MPI and no model here: the executor runs a list, and the transfers follow from the actions.
#pragma once

#include <string>
#include <vector>

namespace gpt {

// kBackward is the input and weight gradient together; ZB-H1 splits it into kBackwardInput (what
// the previous stage waits for) and kBackwardWeight (what can wait to fill a bubble).
enum class ActionKind { kForward, kBackward, kBackwardInput, kBackwardWeight };

struct Action {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this stage, 0..virtual_stages-1
  bool operator==(const Action&) const = default;
};

struct Schedule {
  std::string name;  // "gpipe" | "1f1b" | "interleaved" | "zb-h1"
  int pp = 1, microbatches = 1, virtual_stages = 1;
  std::vector<std::vector<Action>> stages;  // one ordered action list per stage
  // Per stage: the most forward caches held at once. A cache is held from its F until its B, or
  // until its W where the backward is split (W still reads the layer inputs that F saved).
  std::vector<int> stated_caches;
  // Per stage: the most forwards whose B (or B-input) has not run yet. Equal to stated_caches
  // except for ZB-H1, where after B-input a cache only keeps what its W reads, so this is the
  // bound on the larger part of the activation memory.
  std::vector<int> stated_b_caches;
};

// Builds the named schedule. Throws a one-line gpt::Error naming the option for invalid settings:
// unknown name, --virtual-stages above 1 without interleaved, interleaved with --pp below 2, fewer
// than 2 virtual stages or microbatches not a multiple of --pp, zb-h1 with fewer than --pp
// microbatches. GPipe and 1F1B take any microbatch count m >= 1.
Schedule make_schedule(const std::string& name, int pp, int microbatches, int virtual_stages);

// Megatron's interleaving: chunk c of stage s holds model part c*pp + s of the v*pp parts.
inline int virtual_stage(int pp, int stage, int chunk) {
  return chunk * pp + stage;
}

// "F(mb 3, chunk 1)" and the like, for messages and traces.
std::string describe(const Action& action);

// Proves a schedule valid or throws gpt::Error saying why: every (microbatch, virtual stage) has
// exactly one F and one B (or one B-input and one W, never mixed) on the stage that owns it;
// F(mb, vs) runs after F(mb, vs-1), B(mb, vs) after B(mb, vs+1) and F(mb, vs), W after its
// B-input; running the lists with non-blocking sends (an action waits only for its inputs)
// never stalls; the peak caches per stage equal stated_caches and stated_b_caches.
void check_schedule(const Schedule& s);

// Whether each ordered pair of stages exchanges its messages in the same order on both sides: the
// k-th activation or gradient stage a sends to stage b (in a's list order, as the executor posts
// them) is the k-th that b receives from a (in b's order). MPI's tags make any order work; a
// transport without tags (NCCL) matches messages in issue order and needs this, for the whole
// step and for the forward-only runs of eval and generate.
bool transfers_match_in_order(const Schedule& s);

// Full backward costs backward_input + backward_weight; comm is the p2p latency added to every
// dependency between two different stages.
struct ActionCosts {
  double forward = 1, backward_input = 1, backward_weight = 1, comm = 0;
};

struct TimedAction {
  Action action;
  int stage = 0;
  double start = 0, end = 0;
};

struct Timeline {
  std::vector<TimedAction> actions;  // in the order the replay placed them
  double makespan = 0;
  double bubble_fraction = 0;  // idle / (pp * makespan), idle = pp * makespan - busy time
  std::vector<int> peak_caches;
};

// Replays the lists: each stage runs its list in order, each action as soon as the stage is free
// and its inputs have arrived. Throws gpt::Error if the lists stall.
Timeline simulate(const Schedule& s, const ActionCosts& costs);

// The bubble share of a step with F, B and W costing the same: (p-1)/(m+p-1) for GPipe and 1F1B,
// (p-1)/(v*m+p-1) for interleaved, (p-1)/(3m+p-1) for ZB-H1. Throws for settings
// make_schedule refuses.
double theoretical_bubble(const std::string& name, int pp, int m, int v);

}  // namespace gpt
