// PipelineExecutor (see pipeline_executor.h).
#include "parallel/pipeline_executor.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "framework/timer.h"

namespace gpt {

// A pool of indices (cache slots or gradient sets) with the send still reading each.
class PipelineExecutor::Pool {
 public:
  explicit Pool(int size) : sends_(static_cast<size_t>(size)) {
    for (int i = size - 1; i >= 0; --i) free_.push_back(i);
  }
  // An index, and in `send` the send still reading it, if any, to be completed before the buffer
  // is overwritten.
  int take(const char* what, std::unique_ptr<Request>& send) {
    GPT_CHECK(!free_.empty(),
              "the schedule holds more " << what << " than it states (" << sends_.size() << ")");
    const int i = free_.back();
    free_.pop_back();
    send = std::move(sends_[i]);
    ++in_use_;
    return i;
  }
  void release(int i) {
    free_.push_back(i);
    --in_use_;
  }
  void attach_send(int i, std::unique_ptr<Request> r) { sends_[i] = std::move(r); }
  void wait_all() {
    for (auto& r : sends_)
      if (r) r->wait(), r.reset();
  }
  int in_use() const { return in_use_; }

 private:
  std::vector<int> free_;
  std::vector<std::unique_ptr<Request>> sends_;
  int in_use_ = 0;
};

PipelineExecutor::PipelineExecutor(Communicator& pp, int virtual_stages)
    : pp_(pp), pp_size_(pp.size()), stage_(pp.rank()), virtual_stages_(virtual_stages) {}

int PipelineExecutor::tag(int microbatch, int receiving_virtual_stage, bool gradient) const {
  // MPI guarantees tags up to 32767; Open MPI allows 2^31 - 1, far more than a step needs.
  const int64_t t =
      (static_cast<int64_t>(microbatch) * pp_size_ * virtual_stages_ + receiving_virtual_stage) *
          2 +
      (gradient ? 1 : 0);
  GPT_CHECK(t < (int64_t{1} << 30), "pipeline message tag " << t << " out of range");
  return static_cast<int>(t);
}

// One run() on this stage: per chunk, its pools (sized as the schedule states for it), which
// slot and set each (microbatch, chunk) holds, and the statistics.
struct PipelineExecutor::RunState {
  std::vector<PipelineChunk*> chunks;
  std::vector<Pool> slots, grad_sets;
  std::map<std::pair<int, int>, int> slot_of, grad_set_of;  // (microbatch, chunk) -> index
  bool forward_only = false;                                // release each slot after its F
  PipelineStats stats;
  const Action* current = nullptr;  // the action being run, for the wait events
};

void PipelineExecutor::check_chunks(const Schedule& schedule,
                                    const std::vector<PipelineChunk*>& chunks) const {
  GPT_CHECK(schedule.pp == pp_size_ && schedule.virtual_stages == virtual_stages_ &&
                static_cast<int>(chunks.size()) == virtual_stages_,
            "schedule for pp " << schedule.pp << " and " << schedule.virtual_stages
                               << " virtual stages run on a pipeline of " << pp_size_ << " with "
                               << chunks.size() << " chunks per stage");
  GPT_CHECK(pp_.matches_by_tag() || transfers_match_in_order(schedule),
            "the " << schedule_name(schedule.kind)
                   << " schedule posts transfers between some pair of stages in different orders "
                   << "on the two sides, which a transport without tags (NCCL) would mismatch");
  for (int c = 0; c < virtual_stages_; ++c) {
    const PipelineChunk& chunk = *chunks[static_cast<size_t>(c)];
    GPT_CHECK(chunk.num_caches() >= schedule.cache_slots(stage_, c) &&
                  chunk.num_grad_sets() >= schedule.grad_sets(stage_, c),
              "chunk " << c << " of stage " << stage_ << " has " << chunk.num_caches()
                       << " caches and " << chunk.num_grad_sets() << " gradient sets; the "
                       << schedule_name(schedule.kind) << " schedule holds "
                       << schedule.cache_slots(stage_, c) << " and "
                       << schedule.grad_sets(stage_, c));
  }
}

PipelineStats PipelineExecutor::run(const Schedule& schedule,
                                    const std::vector<PipelineChunk*>& chunks) {
  check_chunks(schedule, chunks);
  // The pools take the schedule's counts, not the chunks' (which may hold more, as a training
  // stage does when it also evaluates): a run then never uses more than the schedule states,
  // and check_schedule proved the statement enough.
  RunState run;
  run.chunks = chunks;
  run.forward_only = schedule.kind == ScheduleKind::kForwardOnly;
  for (int c = 0; c < virtual_stages_; ++c) {
    run.slots.emplace_back(schedule.cache_slots(stage_, c));
    run.grad_sets.emplace_back(schedule.grad_sets(stage_, c));
  }
  for (const Action& a : schedule.stages[static_cast<size_t>(stage_)]) {
    run.current = &a;
    const double start = recording_ ? now_seconds() : 0.0;
    const size_t events_before = events_.size();
    switch (a.kind) {
      case ActionKind::kForward:
        run_forward(run, a);
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        run_backward_input(run, a);
        break;
      case ActionKind::kBackwardWeight:
        run_weight(run, a);
        break;
    }
    if (recording_) {
      // The action's compute starts where its receive wait (its own event) ended.
      const double compute_start = events_.size() > events_before ? events_.back().end : start;
      record(static_cast<int>(a.kind), a, compute_start, now_seconds());
    }
  }
  // The last sends, until their peers have received them: pipeline wait, as in take().
  const double drain_start = now_seconds();
  for (Pool& p : run.slots) p.wait_all();
  for (Pool& p : run.grad_sets) p.wait_all();
  run.stats.wait_s += now_seconds() - drain_start;
  GPT_CHECK(run.grad_set_of.empty() && run.slot_of.empty(),
            "the schedule left weight passes or caches pending at its end");
  return run.stats;
}

void PipelineExecutor::run_forward(RunState& run, const Action& a) {
  PipelineChunk& chunk = *run.chunks[static_cast<size_t>(a.chunk)];
  Pool& slots = run.slots[static_cast<size_t>(a.chunk)];
  const int vs = virtual_stage(pp_size_, stage_, a.chunk);
  const int slot = take(run, slots, "forward caches");
  if (vs > 0)
    receive(run, chunk, chunk.input_activation(slot), vs - 1, tag(a.microbatch, vs, false));
  chunk.forward(slot, a.microbatch);
  if (vs < pp_size_ * virtual_stages_ - 1) {
    slots.attach_send(slot, send(chunk, chunk.output_activation(slot), chunk.activation_wire(slot),
                                 vs + 1, tag(a.microbatch, vs + 1, false)));
  }
  int in_use = 0;
  for (const Pool& p : run.slots) in_use += p.in_use();
  run.stats.peak_caches = std::max(run.stats.peak_caches, in_use);
  if (run.forward_only) {
    slots.release(slot);
  } else {
    run.slot_of[{a.microbatch, a.chunk}] = slot;
  }
}

void PipelineExecutor::run_backward_input(RunState& run, const Action& a) {
  PipelineChunk& chunk = *run.chunks[static_cast<size_t>(a.chunk)];
  Pool& grad_sets = run.grad_sets[static_cast<size_t>(a.chunk)];
  const int vs = virtual_stage(pp_size_, stage_, a.chunk);
  const int slot = run.slot_of.at({a.microbatch, a.chunk});
  const int gs = take(run, grad_sets, "gradient sets");
  if (vs < pp_size_ * virtual_stages_ - 1) {
    receive(run, chunk, chunk.output_grad(gs), vs + 1, tag(a.microbatch, vs, true));
  }
  chunk.backward_input(slot, gs, a.microbatch, a.kind == ActionKind::kBackward);
  if (vs > 0) {
    grad_sets.attach_send(gs, send(chunk, chunk.input_grad(gs), chunk.gradient_wire(gs), vs - 1,
                                   tag(a.microbatch, vs - 1, true)));
  }
  if (a.kind == ActionKind::kBackward) {
    finish_backward(run, a, slot, gs);
  } else {
    run.grad_set_of[{a.microbatch, a.chunk}] = gs;
  }
}

void PipelineExecutor::run_weight(RunState& run, const Action& a) {
  const std::pair<int, int> key{a.microbatch, a.chunk};
  const int gs = run.grad_set_of.at(key);
  run.grad_set_of.erase(key);
  finish_backward(run, a, run.slot_of.at(key), gs);
}

// The weight half, after which the microbatch's cache and gradient set are free.
void PipelineExecutor::finish_backward(RunState& run, const Action& a, int slot, int grad_set) {
  const size_t c = static_cast<size_t>(a.chunk);
  run.chunks[c]->backward_weight(slot, grad_set, a.microbatch);
  run.grad_sets[c].release(grad_set);
  run.slots[c].release(slot);
  run.slot_of.erase({a.microbatch, a.chunk});
}

// A wire of n bf16 values travels as ceil(n / 2) float-sized words: a point-to-point transfer
// copies the bits it is given, whatever type it is told they are.
namespace {
int64_t wire_words(int64_t n) {
  return (n + 1) / 2;
}
}  // namespace

void PipelineExecutor::receive(RunState& run, PipelineChunk& chunk, float* buf, int peer_vs,
                               int tag) {
  const int64_t n = chunk.boundary_elements();
  uint16_t* wire = chunk.receive_wire();
  const double start = now_seconds();
  if (wire) {
    pp_.recv(reinterpret_cast<float*>(wire), wire_words(n), stage_of(peer_vs), tag);
  } else {
    pp_.recv(buf, n, stage_of(peer_vs), tag);
  }
  add_wait(run, start, now_seconds());
  if (wire) chunk.unpack(buf, wire);
}

std::unique_ptr<Request> PipelineExecutor::send(PipelineChunk& chunk, const float* buf,
                                                uint16_t* wire, int peer_vs, int tag) {
  const int64_t n = chunk.boundary_elements();
  if (!wire) return pp_.isend(buf, n, stage_of(peer_vs), tag);
  chunk.pack(wire, buf);
  return pp_.isend(reinterpret_cast<const float*>(wire), wire_words(n), stage_of(peer_vs), tag);
}

int PipelineExecutor::take(RunState& run, Pool& pool, const char* what) {
  std::unique_ptr<Request> send;
  const int i = pool.take(what, send);
  if (send) {
    // A send completes when its peer has received it (NCCL, and MPI above its eager limit): until
    // the peer reaches that receive, this stage waits on the pipeline as a receive would.
    const double start = now_seconds();
    send->wait();
    add_wait(run, start, now_seconds());
  }
  return i;
}

void PipelineExecutor::add_wait(RunState& run, double start, double end) {
  run.stats.wait_s += end - start;
  if (recording_) record(TraceEvent::kWait, *run.current, start, end);
}

void PipelineExecutor::record(int kind, const Action& a, double start, double end) {
  events_.push_back(TraceEvent{kind, a.microbatch, a.chunk, step_, start, end});
}

}  // namespace gpt
