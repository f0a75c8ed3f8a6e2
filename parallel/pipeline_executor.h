// The pipeline executor: runs one stage's action list of a Schedule on the model chunks this rank
// holds. Transfers follow from the actions: a forward receives its input activation from the
// previous virtual stage and sends its output to the next; a backward (or its input half)
// receives the output gradient from the next virtual stage and sends the input gradient back.
// Sends are non-blocking and completed before their buffer is reused: a rank waits for its
// inputs and, where a send's peer has not yet received it, for that send (the schedule checker
// proves the lists never stall on inputs; both waits count as the pipeline's). Each message's tag
// names (microbatch, receiving virtual stage, activation or gradient), so nothing can match the
// wrong buffer. Cache slots are taken at F and gradient sets at B (or B-input), both released at
// the end of B (or at W), and a forward-only schedule's slot right after its F; each chunk's pools
// are as large as the schedule states for it.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/pipeline_schedule.h"

namespace gpt {

// What the executor drives: the model chunk of one virtual stage (layers/ implements it).
class PipelineChunk {
 public:
  virtual ~PipelineChunk() = default;
  virtual int64_t boundary_elements() const = 0;  // floats of one activation or its gradient
  virtual int num_caches() const = 0;             // cache slots allocated: 0..num_caches()-1
  virtual int num_grad_sets() const = 0;          // gradient sets allocated
  virtual float* input_activation(int slot) = 0;
  virtual float* output_activation(int slot) = 0;
  virtual float* output_grad(int grad_set) = 0;
  virtual float* input_grad(int grad_set) = 0;
  virtual void forward(int slot, int microbatch) = 0;
  // weight_follows: backward_weight of the same microbatch comes next (a whole backward), so
  // the chunk may compute part of the weight half here.
  virtual void backward_input(int slot, int grad_set, int microbatch, bool weight_follows) = 0;
  virtual void backward_weight(int slot, int grad_set, int microbatch) = 0;

  // 16-bit messages: where the boundary tensors hold bf16 values (bf16 precision stores the
  // residual stream so), they travel as their bf16 bits, half the bytes, losing nothing. Null
  // wires: float32 messages. A send's wire belongs to its cache slot (activations) or gradient
  // set (gradients), as the send reads it until that is reused; the blocking receives share one.
  // Wires hold an even number of values, boundary_elements() rounded up.
  virtual uint16_t* activation_wire(int /*slot*/) { return nullptr; }
  virtual uint16_t* gradient_wire(int /*grad_set*/) { return nullptr; }
  virtual uint16_t* receive_wire() { return nullptr; }
  virtual void pack(uint16_t* /*wire*/, const float* /*values*/) {}    // boundary_elements()
  virtual void unpack(float* /*values*/, const uint16_t* /*wire*/) {}  // boundary_elements()
};

// One recorded interval of a run (set_recording): an action, or the time blocked in a receive or
// on a send whose buffer the action reuses (kind kWait, with the action it waited for). Seconds of
// now_seconds() on this rank's clock.
struct TraceEvent {
  enum Kind : int {
    kForward = 0,
    kBackward = 1,
    kBackwardInput = 2,
    kBackwardWeight = 3,
    kWait = 4
  };
  int kind = kForward;
  int microbatch = 0;
  int chunk = 0;
  int step = 0;  // set_step's value when recorded
  double start = 0.0, end = 0.0;
};

struct PipelineStats {
  // Time blocked receiving, or on a send whose buffer is about to be reused (the measured bubble
  // plus transfer time).
  double wait_s = 0.0;
  int peak_caches = 0;  // most forward caches held at once on this stage, all chunks
};

class PipelineExecutor {
 public:
  // pp: the pipeline group (its rank is the stage). A send needs no synchronisation first: a
  // communicator orders its transfers after the work already issued (communicator.h).
  PipelineExecutor(Communicator& pp, int virtual_stages);

  // Runs this stage's list. chunks[c] is model chunk c (virtual stage c * pp + stage) and holds
  // at least the schedule's cache_slots and grad_sets for it.
  PipelineStats run(const Schedule& schedule, const std::vector<PipelineChunk*>& chunks);

  // Recording of actions and receive waits (off by default; when off, nothing is timed or
  // stored beyond what run() already does). Events accumulate over runs until clear_events().
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }
  void set_step(int step) { step_ = step; }  // tags the events recorded from now on
  const std::vector<TraceEvent>& events() const { return events_; }
  void clear_events() { events_.clear(); }

 private:
  class Pool;       // cache slots or gradient sets, each with its pending send
  struct RunState;  // one run's pools, holdings and statistics (pipeline_executor.cpp)
  void check_chunks(const Schedule& schedule, const std::vector<PipelineChunk*>& chunks) const;
  void run_forward(RunState& run, const Action& a);
  void run_backward_input(RunState& run, const Action& a);  // and the weight half for a whole B
  void run_weight(RunState& run, const Action& a);
  void finish_backward(RunState& run, const Action& a, int slot, int grad_set);
  // Blocking receive of a boundary tensor from the stage of peer_vs into buf, timed as pipeline
  // wait; through the chunk's receive wire when it has one.
  void receive(RunState& run, PipelineChunk& chunk, float* buf, int peer_vs, int tag);
  // Posts the send of boundary tensor buf (through `wire` when not null) to the stage of peer_vs.
  std::unique_ptr<Request> send(PipelineChunk& chunk, const float* buf, uint16_t* wire, int peer_vs,
                                int tag);
  // An index of `pool`, after its pending send (timed as pipeline wait) has completed.
  int take(RunState& run, Pool& pool, const char* what);
  void add_wait(RunState& run, double start, double end);
  void record(int kind, const Action& a, double start, double end);
  int tag(int microbatch, int receiving_virtual_stage, bool gradient) const;
  int stage_of(int virtual_stage) const { return virtual_stage % pp_size_; }

  Communicator& pp_;
  int pp_size_, stage_, virtual_stages_;
  bool recording_ = false;
  int step_ = 0;
  std::vector<TraceEvent> events_;
};

}  // namespace gpt
