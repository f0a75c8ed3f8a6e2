// The pipeline executor on fake chunks, over the pp communicator of every rank of MPI_COMM_WORLD
// (stage = rank): every schedule over a range of microbatch counts. Each fake chunk records its
// calls, writes into what it sends a value naming (microbatch, virtual stage, activation or
// gradient), and checks that what it receives is what its sender wrote, so a wrong tag or buffer
// shows as wrong data; it also keeps its own account of which microbatch holds each cache slot
// and gradient set, so a slot or set handed out while still held, or the wrong one handed to a
// backward, is caught, and the peaks it measures must equal what was allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"

namespace gpt {
namespace {

// Above Open MPI's shared-memory eager limit (4 KiB), so a send buffer overwritten before its
// send completed would arrive overwritten.
constexpr int64_t kElements = 4096;

enum class Call { kForward, kBackwardInput, kBackwardWeight };

struct CallRecord {
  Call call;
  int chunk, microbatch;
  bool operator==(const CallRecord&) const = default;
};

std::string describe(const CallRecord& c) {
  const char* names[] = {"forward", "backward_input", "backward_weight"};
  return std::string(names[static_cast<int>(c.call)]) + "(mb " + std::to_string(c.microbatch) +
         ", chunk " + std::to_string(c.chunk) + ")";
}

// What virtual stage `sender` sends for `microbatch`: exact in float for the sizes used here.
float sent_value(int microbatch, int sender, bool gradient, int64_t i) {
  return static_cast<float>((((microbatch * 64 + sender) * 2 + (gradient ? 1 : 0)) * 4) + i % 4);
}

// Which microbatch holds each index of a pool (-1: free), and the most held at once.
class Holdings {
 public:
  Holdings(const char* what, int size) : what_(what), holder_(static_cast<size_t>(size), -1) {}
  void take(int index, int microbatch) {
    if (!in_range(index)) return;
    EXPECT_EQ(holder_[index], -1) << what_ << " " << index << " handed to mb " << microbatch
                                  << " while mb " << holder_[index] << " still holds it";
    holder_[index] = microbatch;
    peak_ = std::max(peak_, ++held_);
  }
  void expect_held(int index, int microbatch) const {
    if (!in_range(index)) return;
    EXPECT_EQ(holder_[index], microbatch)
        << what_ << " " << index << " handed to mb " << microbatch << "'s backward";
  }
  void release(int index) {
    if (!in_range(index)) return;
    holder_[index] = -1;
    --held_;
  }
  int peak() const { return peak_; }
  int held() const { return held_; }

 private:
  bool in_range(int index) const {
    EXPECT_TRUE(index >= 0 && index < static_cast<int>(holder_.size()))
        << what_ << " " << index << " of " << holder_.size();
    return index >= 0 && index < static_cast<int>(holder_.size());
  }
  const char* what_;
  std::vector<int> holder_;
  int held_ = 0, peak_ = 0;
};

// A model chunk of virtual stage `vs` that computes nothing. A cache is held from its forward to
// its weight pass (which the executor runs right after the input half for a full backward), or
// only through the forward when nothing follows it (a forward-only schedule).
class FakeChunk : public PipelineChunk {
 public:
  FakeChunk(int chunk, int vs, int last_vs, int caches, int grad_sets, bool forward_only,
            std::vector<CallRecord>& log)
      : chunk_(chunk),
        vs_(vs),
        last_vs_(last_vs),
        forward_only_(forward_only),
        log_(log),
        slots_("cache slot", caches),
        sets_("gradient set", grad_sets),
        input_activation_(static_cast<size_t>(caches), std::vector<float>(kElements)),
        output_activation_(input_activation_),
        output_grad_(static_cast<size_t>(grad_sets), std::vector<float>(kElements)),
        input_grad_(output_grad_) {}

  int64_t boundary_elements() const override { return kElements; }
  int num_caches() const override { return static_cast<int>(input_activation_.size()); }
  int num_grad_sets() const override { return static_cast<int>(output_grad_.size()); }
  float* input_activation(int slot) override { return input_activation_.at(slot).data(); }
  float* output_activation(int slot) override { return output_activation_.at(slot).data(); }
  float* output_grad(int grad_set) override { return output_grad_.at(grad_set).data(); }
  float* input_grad(int grad_set) override { return input_grad_.at(grad_set).data(); }

  void forward(int slot, int microbatch) override {
    log_.push_back({Call::kForward, chunk_, microbatch});
    slots_.take(slot, microbatch);
    if (vs_ > 0) expect_received(input_activation_.at(slot), microbatch, vs_ - 1, false);
    fill(output_activation_.at(slot), microbatch, false);
    if (forward_only_) slots_.release(slot);
  }
  void backward_input(int slot, int grad_set, int microbatch, bool /*weight_follows*/) override {
    log_.push_back({Call::kBackwardInput, chunk_, microbatch});
    slots_.expect_held(slot, microbatch);
    sets_.take(grad_set, microbatch);
    if (vs_ < last_vs_) expect_received(output_grad_.at(grad_set), microbatch, vs_ + 1, true);
    fill(input_grad_.at(grad_set), microbatch, true);
  }
  void backward_weight(int slot, int grad_set, int microbatch) override {
    log_.push_back({Call::kBackwardWeight, chunk_, microbatch});
    slots_.expect_held(slot, microbatch);
    sets_.expect_held(grad_set, microbatch);
    slots_.release(slot);
    sets_.release(grad_set);
  }

  const Holdings& slots() const { return slots_; }
  const Holdings& sets() const { return sets_; }

 private:
  void fill(std::vector<float>& buffer, int microbatch, bool gradient) const {
    for (int64_t i = 0; i < kElements; ++i) buffer[i] = sent_value(microbatch, vs_, gradient, i);
  }
  void expect_received(const std::vector<float>& buffer, int microbatch, int sender,
                       bool gradient) const {
    int64_t wrong = 0;
    for (int64_t i = 0; i < kElements; ++i)
      wrong += buffer[i] != sent_value(microbatch, sender, gradient, i) ? 1 : 0;
    EXPECT_EQ(wrong, 0) << "virtual stage " << vs_ << " received for mb " << microbatch
                        << (gradient ? " a gradient" : " an activation") << " other than virtual "
                        << "stage " << sender << " sent (first element " << buffer[0]
                        << ", expected " << sent_value(microbatch, sender, gradient, 0) << ")";
  }

  int chunk_, vs_, last_vs_;
  bool forward_only_;
  std::vector<CallRecord>& log_;
  Holdings slots_, sets_;
  std::vector<std::vector<float>> input_activation_, output_activation_;
  std::vector<std::vector<float>> output_grad_, input_grad_;
};

// The chunk calls a stage's list makes, in order: a full backward is its two halves.
std::vector<CallRecord> expected_calls(const std::vector<Action>& list) {
  std::vector<CallRecord> calls;
  for (const Action& a : list) {
    switch (a.kind) {
      case ActionKind::kForward:
        calls.push_back({Call::kForward, a.chunk, a.microbatch});
        break;
      case ActionKind::kBackward:
        calls.push_back({Call::kBackwardInput, a.chunk, a.microbatch});
        calls.push_back({Call::kBackwardWeight, a.chunk, a.microbatch});
        break;
      case ActionKind::kBackwardInput:
        calls.push_back({Call::kBackwardInput, a.chunk, a.microbatch});
        break;
      case ActionKind::kBackwardWeight:
        calls.push_back({Call::kBackwardWeight, a.chunk, a.microbatch});
        break;
    }
  }
  return calls;
}

// Collective over MPI_COMM_WORLD: runs this rank's list of `s` on fake chunks allocated with the
// schedule's counts for this stage and checks the calls, the holdings and their peaks.
void run_on_fake_chunks(const Schedule& s) {
  SCOPED_TRACE(std::string(schedule_name(s.kind)) + " pp " + std::to_string(s.pp) + " m " +
               std::to_string(s.microbatches) + " v " + std::to_string(s.virtual_stages));
  std::unique_ptr<Communicator> pp = make_mpi_communicator(MPI_COMM_WORLD, "pp");
  const int stage = pp->rank(), v = s.virtual_stages;
  std::vector<CallRecord> log;
  std::deque<FakeChunk> chunks;
  std::vector<PipelineChunk*> pointers;
  for (int c = 0; c < v; ++c) {
    chunks.emplace_back(c, virtual_stage(s.pp, stage, c), s.pp * v - 1, s.cache_slots(stage, c),
                        s.grad_sets(stage, c), s.kind == ScheduleKind::kForwardOnly, log);
    pointers.push_back(&chunks.back());
  }
  const PipelineStats stats = PipelineExecutor(*pp, v).run(s, pointers);

  const std::vector<CallRecord> want = expected_calls(s.stages[static_cast<size_t>(stage)]);
  ASSERT_EQ(log.size(), want.size()) << "stage " << stage << " made " << log.size()
                                     << " chunk calls for a list of " << want.size();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(log[i], want[i]) << "stage " << stage << " call " << i << ": " << describe(log[i])
                               << ", the list says " << describe(want[i]);
  for (int c = 0; c < v; ++c) {
    const FakeChunk& chunk = chunks[static_cast<size_t>(c)];
    EXPECT_EQ(chunk.slots().held(), 0) << "stage " << stage << " chunk " << c;
    EXPECT_EQ(chunk.sets().held(), 0) << "stage " << stage << " chunk " << c;
    // The most held at once = stated = allocated (the fake's size).
    EXPECT_EQ(chunk.slots().peak(), s.cache_slots(stage, c)) << "stage " << stage << " chunk " << c;
    EXPECT_EQ(chunk.sets().peak(), s.grad_sets(stage, c)) << "stage " << stage << " chunk " << c;
  }
  EXPECT_EQ(stats.peak_caches, s.stated_caches[static_cast<size_t>(stage)]) << "stage " << stage;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

constexpr int kMaxMicrobatches = 9;

TEST(PipelineExecutor, GpipeAnd1f1b) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::k1f1b})
    for (int m = 1; m <= kMaxMicrobatches; ++m)
      run_on_fake_chunks(make_schedule(kind, world_size(), m, 1));
}

TEST(PipelineExecutor, Interleaved) {
  const int pp = world_size();
  if (pp < 2) GTEST_SKIP() << "interleaved needs 2 stages";
  for (int v : {2, 3})
    for (int m = pp; m <= 2 * pp + 4; m += pp)
      run_on_fake_chunks(make_schedule(ScheduleKind::kInterleaved, pp, m, v));
}

TEST(PipelineExecutor, ZbH1) {
  const int pp = world_size();
  for (int m = pp; m <= kMaxMicrobatches; ++m)
    run_on_fake_chunks(make_schedule(ScheduleKind::kZbH1, pp, m, 1));
}

// Odd stages take their forwards in reverse order, so they receive activations in another order
// than their senders post them: only the tags can match each message to its microbatch.
TEST(PipelineExecutor, TagsMatchReceivesPostedOutOfOrder) {
  for (int m = 2; m <= 4; ++m) {
    Schedule s = make_schedule(ScheduleKind::kGpipe, world_size(), m, 1);
    for (size_t stage = 1; stage < s.stages.size(); stage += 2) {
      auto& list = s.stages[stage];
      std::reverse(list.begin(), list.begin() + m);  // gpipe: the m forwards come first
    }
    check_schedule(s);  // still valid, with the same counts
    run_on_fake_chunks(s);
  }
}

TEST(PipelineExecutor, ForwardOnly) {
  for (int v : {1, 2, 3})
    for (int m = 1; m <= 5; ++m) run_on_fake_chunks(make_forward_only_schedule(world_size(), m, v));
}

// A send completes once its peer has received it (the message is above the eager limit): the
// forward-only schedule's stage 0 reuses its one cache slot for microbatch 1, so it waits for
// stage 1, 0.2 s late, to receive microbatch 0. That wait is the pipeline's: in wait_s (stage 0
// receives nothing here) and recorded as a wait before F1.
TEST(PipelineExecutor, WaitingForASendToBeReceivedIsPipelineWait) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 stages";
  const Schedule s = make_forward_only_schedule(world_size(), 2, 1);
  std::unique_ptr<Communicator> pp = make_mpi_communicator(MPI_COMM_WORLD, "pp");
  const int stage = pp->rank();
  std::vector<CallRecord> log;
  FakeChunk chunk(0, stage, s.pp - 1, s.cache_slots(stage, 0), 0, true, log);
  PipelineExecutor executor(*pp, 1);
  executor.set_recording(true);
  if (stage == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const PipelineStats stats = executor.run(s, {&chunk});
  if (stage != 0) return;
  EXPECT_GT(stats.wait_s, 0.1);
  const std::vector<TraceEvent>& events = executor.events();
  ASSERT_EQ(events.size(), 3u);  // F0, the wait, F1
  EXPECT_EQ(events[1].kind, TraceEvent::kWait);
  EXPECT_EQ(events[1].microbatch, 1);
  EXPECT_GT(events[1].end - events[1].start, 0.1);
  EXPECT_EQ(events[2].kind, TraceEvent::kForward);
  EXPECT_EQ(events[2].microbatch, 1);
}

}  // namespace
}  // namespace gpt
