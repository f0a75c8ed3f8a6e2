// Pipeline schedules as data (docs/DESIGN.md "Pipeline schedules are data"): GPipe, 1F1B,
// interleaved 1F1B, ZB-H1 and forward-only as one ordered action list per stage, with the cache and
// gradient set counts each (stage, chunk) holds; a checker that proves a list set valid (each
// action once, dependencies satisfiable, no deadlock, the stated counts); and a replay with
// per-action costs that gives the timeline and bubble the planner and tests rely on. No MPI and no
// model here: the executor runs a list, and the transfers follow from the actions.
#pragma once

#include <string>
#include <vector>

namespace gpt {

// kBackward is the input and weight gradient together (the input gradient is sent between the
// two halves); ZB-H1 splits it into kBackwardInput (what the previous stage waits for) and
// kBackwardWeight (what can wait to fill a bubble).
enum class ActionKind { kForward, kBackward, kBackwardInput, kBackwardWeight };

struct Action {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this stage, 0..virtual_stages-1
  bool operator==(const Action&) const = default;
};

enum class ScheduleKind { kGpipe, k1f1b, kInterleaved, kZbH1, kForwardOnly };
// The training schedules, the values --schedule takes.
inline constexpr ScheduleKind kTrainingSchedules[] = {
    ScheduleKind::k1f1b, ScheduleKind::kGpipe, ScheduleKind::kInterleaved, ScheduleKind::kZbH1};

// "gpipe", "1f1b", "interleaved", "zb-h1" (the --schedule names) and "forward-only", for
// messages and traces.
const char* schedule_name(ScheduleKind kind);

// A schedule and the facts about it that its users size memory by. check_schedule proves every
// stated count equal to what the lists hold. A cache is held from its F until its B, or until its
// W when the backward is split (W still reads the layer inputs that F saved), or only through its
// F in a forward-only schedule; a gradient set from its B (or B-input) until the end of that B
// (or until its W).
struct Schedule {
  ScheduleKind kind = ScheduleKind::k1f1b;
  int pp = 1, microbatches = 1, virtual_stages = 1;
  std::vector<std::vector<Action>> stages;  // one ordered action list per stage
  // [stage][chunk]: the most caches, and gradient sets, chunk `chunk` of `stage` holds at once.
  // Each chunk owns its buffers (its layers differ), so these are what each allocates.
  std::vector<std::vector<int>> stated_chunk_caches, stated_chunk_grad_sets;
  // Per stage, all chunks together: the most forward caches held at once. At most the sum over
  // the chunks, and less for interleaved, whose chunks peak at different times.
  std::vector<int> stated_caches;
  // Per stage: the most forwards whose B (or B-input) has not run yet. Equal to stated_caches
  // except for ZB-H1, where after B-input a cache only keeps what its W reads, so this is the
  // bound on the larger part of the activation memory.
  std::vector<int> stated_b_caches;

  int cache_slots(int stage, int chunk) const;
  int grad_sets(int stage, int chunk) const;
  // Whether backwards run as B-input and W apart (ZB-H1) rather than as one B.
  bool splits_backward() const { return kind == ScheduleKind::kZbH1; }
};

// Builds a schedule. Throws a one-line gpt::Error naming the option for invalid settings:
// --virtual-stages above 1 without interleaved, interleaved with --pp below 2, fewer than 2
// virtual stages or microbatches not a multiple of --pp, zb-h1 with fewer than --pp
// microbatches. GPipe and 1F1B take any microbatch count m >= 1, forward-only any v >= 1.
Schedule make_schedule(ScheduleKind kind, int pp, int microbatches, int virtual_stages);

// Forwards only (evaluation, generation), microbatch by microbatch through every chunk: each
// F's cache is released right after it, so each chunk needs one.
Schedule make_forward_only_schedule(int pp, int microbatches, int virtual_stages);

// Megatron's interleaving: chunk c of stage s holds model part c*pp + s of the v*pp parts.
inline int virtual_stage(int pp, int stage, int chunk) {
  return chunk * pp + stage;
}

// "F(mb 3, chunk 1)" and the like, for messages and traces.
std::string describe(const Action& action);

// Proves a schedule valid or throws gpt::Error saying why: every (microbatch, virtual stage) has
// exactly one F and one B, or one B-input and one W when the schedule splits its backwards, or
// no backward when it is forward-only, on the stage that owns it; F(mb, vs) runs after
// F(mb, vs-1), B(mb, vs) after B(mb, vs+1) and F(mb, vs), W after its B-input; running the lists
// with non-blocking sends (an action waits only for its inputs) never stalls; the peaks equal
// every stated count.
void check_schedule(const Schedule& s);

// Whether each ordered pair of stages exchanges its messages in the same order on both sides: the
// k-th activation or gradient stage a sends to stage b (in a's list order, as the executor posts
// them) is the k-th that b receives from a (in b's order). MPI's tags make any order work; a
// transport without tags (NCCL) matches messages in issue order and needs this.
bool transfers_match_in_order(const Schedule& s);

// Full backward costs backward_input + backward_weight; comm is the p2p latency added to every
// dependency between two different stages.
struct ActionCosts {
  double forward = 1, backward_input = 1, backward_weight = 1, comm = 0;
  // A send completes only once its peer has received it (NCCL; MPI above its eager limit), so
  // an action reusing a buffer waits for that; false: sends complete when handed over.
  bool rendezvous = true;
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

// Replays the lists: each stage runs its list in order, each action as soon as the stage is free,
// its inputs have arrived and (costs.rendezvous) the last send from the buffer it takes has a
// receiver ready for it. Throws gpt::Error if the lists stall.
Timeline simulate(const Schedule& s, const ActionCosts& costs);

// The three pass costs of one virtual stage (model part).
struct PassCosts {
  double forward = 1, backward_input = 1, backward_weight = 1;
};
// The same replay with costs per virtual stage (pp * virtual_stages entries, in virtual-stage
// order) instead of costs' uniform ones, whose comm still applies: the planner's stages differ
// (the embedding on the first, the head on the last).
Timeline simulate(const Schedule& s, const ActionCosts& costs,
                  const std::vector<PassCosts>& per_virtual_stage);

}  // namespace gpt
