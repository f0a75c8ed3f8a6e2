// PipelineExecutor (see pipeline_executor.h).
#include "parallel/pipeline_executor.h"

#include <algorithm>

#include "framework/check.h"
#include "framework/timer.h"

namespace gpt {
namespace {

// A pool of indices (cache slots or gradient sets) with the send still reading each.
class Pool {
 public:
  explicit Pool(int size) : sends_(static_cast<size_t>(size)) {
    for (int i = size - 1; i >= 0; --i) free_.push_back(i);
  }
  int take(const char* what) {
    GPT_CHECK(!free_.empty(), "the schedule holds more " << what << " than were allocated ("
                                                         << sends_.size() << ")");
    const int i = free_.back();
    free_.pop_back();
    if (sends_[i]) sends_[i]->wait();  // the buffer is about to be overwritten
    sends_[i].reset();
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

}  // namespace

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

PipelineStats PipelineExecutor::run(const Schedule& schedule,
                                    const std::vector<PipelineChunk*>& chunks, bool forward_only) {
  GPT_CHECK(schedule.pp == pp_size_ && static_cast<int>(chunks.size()) == virtual_stages_,
            "schedule for pp " << schedule.pp << " run on a pipeline of " << pp_size_);
  GPT_CHECK(pp_.matches_by_tag() || transfers_match_in_order(schedule),
            "the " << schedule.name << " schedule posts transfers between some pair of stages in "
                   << "different orders on the two sides, which a transport without tags (NCCL) "
                   << "would mismatch");
  const int last_vs = pp_size_ * virtual_stages_ - 1;
  std::vector<Pool> slots, grad_sets;
  for (PipelineChunk* c : chunks) {
    slots.emplace_back(c->num_caches());
    grad_sets.emplace_back(c->num_grad_sets());
  }
  std::map<std::pair<int, int>, int> slot_of, grad_set_of;  // (microbatch, chunk) -> index
  PipelineStats stats;
  const Action* current = nullptr;  // the action being run (recording only)
  auto record = [&](int kind, const Action& a, double start, double end) {
    events_.push_back(TraceEvent{kind, a.microbatch, a.chunk, step_, start, end});
  };
  auto receive = [&](float* buf, int64_t count, int peer_vs, int t) {
    const double start = now_seconds();
    pp_.recv(buf, count, stage_of(peer_vs), t);
    const double end = now_seconds();
    stats.wait_s += end - start;
    if (recording_) record(TraceEvent::kWait, *current, start, end);
  };
  // Records the action from after its receive (if any) to its end: the wait is its own event.
  struct ActionScope {
    PipelineExecutor* self;
    const Action* action;
    double start;
    size_t wait_index;
    decltype(record)* rec;
    ~ActionScope() {
      if (!self || !self->recording_) return;
      // The action's compute starts where its receive wait ended.
      double s = start;
      if (self->events_.size() > wait_index) s = self->events_.back().end;
      (*rec)(static_cast<int>(action->kind), *action, s, now_seconds());
    }
  };
  for (const Action& a : schedule.stages[static_cast<size_t>(stage_)]) {
    if (forward_only && a.kind != ActionKind::kForward) continue;
    current = &a;
    ActionScope scope{recording_ ? this : nullptr, &a, recording_ ? now_seconds() : 0.0,
                      events_.size(), &record};
    PipelineChunk& chunk = *chunks[static_cast<size_t>(a.chunk)];
    const int vs = virtual_stage(pp_size_, stage_, a.chunk);
    const int64_t n = chunk.boundary_elements();
    const auto key = std::make_pair(a.microbatch, a.chunk);
    if (a.kind == ActionKind::kForward) {
      const int slot = slots[a.chunk].take("forward caches");
      slot_of[key] = slot;
      if (vs > 0) receive(chunk.input_activation(slot), n, vs - 1, tag(a.microbatch, vs, false));
      chunk.forward(slot, a.microbatch);
      if (vs < last_vs) {
        slots[a.chunk].attach_send(slot,
                                   pp_.isend(chunk.output_activation(slot), n, stage_of(vs + 1),
                                             tag(a.microbatch, vs + 1, false)));
      }
      int in_use = 0;
      for (const Pool& p : slots) in_use += p.in_use();
      stats.peak_caches = std::max(stats.peak_caches, in_use);
      if (forward_only) slots[a.chunk].release(slot_of.at(key)), slot_of.erase(key);
      continue;
    }
    const int slot = slot_of.at(key);
    if (a.kind == ActionKind::kBackwardWeight) {
      const int gs = grad_set_of.at(key);
      chunk.backward_weight(slot, gs, a.microbatch);
      grad_sets[a.chunk].release(gs);
      slots[a.chunk].release(slot);
      grad_set_of.erase(key);
      slot_of.erase(key);
      continue;
    }
    const int gs = grad_sets[a.chunk].take("gradient sets");
    if (vs < last_vs) receive(chunk.output_grad(gs), n, vs + 1, tag(a.microbatch, vs, true));
    chunk.backward_input(slot, gs, a.microbatch);
    if (vs > 0) {
      grad_sets[a.chunk].attach_send(gs, pp_.isend(chunk.input_grad(gs), n, stage_of(vs - 1),
                                                   tag(a.microbatch, vs - 1, true)));
    }
    if (a.kind == ActionKind::kBackward) {
      chunk.backward_weight(slot, gs, a.microbatch);
      grad_sets[a.chunk].release(gs);
      slots[a.chunk].release(slot);
      slot_of.erase(key);
    } else {
      grad_set_of[key] = gs;
    }
  }
  for (Pool& p : slots) p.wait_all();
  for (Pool& p : grad_sets) p.wait_all();
  GPT_CHECK(grad_set_of.empty() && (forward_only || slot_of.empty()),
            "the schedule left weight passes or caches pending at its end");
  return stats;
}

}  // namespace gpt
