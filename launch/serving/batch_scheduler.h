// serve's continuous batching, on rank 0 (no MPI here: plans in, tokens out). Requests wait in
// arrival order until the key/value pool can hold their whole prompt and max_tokens (blocks are
// reserved at admission, so a running sequence never runs out and nothing is preempted), then run
// until they finish; new ones join at any step and finished ones leave at once. With pp stages
// the running sequences form pp groups planned in turn, so that pp steps are in the pipeline at
// once and every stage has work; a group's sampled tokens come back just before its next turn.
// Each step's rows: first one row per decoding sequence, then prompt rows (prefill) of admitted
// sequences in chunks, so that a long prompt never holds up the running decodes for more than a
// step's row budget.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <vector>

#include "launch/inference/kv_block_pool.h"
#include "launch/serving/served_request.h"
#include "launch/serving/step_plan.h"

namespace gpt {

struct SchedulerLimits {
  int64_t max_rows = 256;      // token rows in a step
  int64_t max_sequences = 64;  // running sequences, over all groups
  int groups = 1;              // the pipeline's stages
  int64_t seq_len = 0;         // the model's context
  int64_t max_blocks = 0;      // a block table's width
};

struct ScheduledSequence {
  std::shared_ptr<ServedRequest> request;
  std::vector<int32_t> tokens;  // the prompt, then each generated token
  int64_t prompt_length = 0;
  int64_t cached = 0;  // positions already sent through the model
  std::vector<int32_t> table;
  int group = 0;
  ServeClock::time_point first_token, last_token;
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
};

class BatchScheduler {
 public:
  BatchScheduler(const SchedulerLimits& limits, KvBlockPool& pool);

  void add(std::shared_ptr<ServedRequest> request);  // waits in arrival order
  // The plan of `step` (group step % groups); kIdle when it has no rows.
  StepPlan plan(int64_t step);
  // The sequences whose tokens the plan of `step` samples, in its logit rows' order (removed).
  std::vector<ScheduledSequence*> take_expected(int64_t step);
  // Ends a sequence: its blocks go back to the pool.
  void finish(ScheduledSequence* sequence);
  // Cancelled requests leave: those waiting at once, running ones when their group's tokens are
  // back (never while a plan in flight still reads their blocks). Returns them.
  std::vector<std::shared_ptr<ServedRequest>> drop_cancelled(int64_t step);
  // Cancels every waiting and running request (shutdown).
  void cancel_all();

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  // Whether a plan with rows is still in the pipeline (its tokens not yet taken).
  bool in_flight() const { return !expected_.empty(); }
  double kv_usage() const {
    return 1.0 - static_cast<double>(pool_.free()) / static_cast<double>(pool_.total());
  }

 private:
  SchedulerLimits limits_;
  KvBlockPool& pool_;
  std::deque<std::shared_ptr<ServedRequest>> waiting_;
  std::list<ScheduledSequence> running_;
  std::map<int64_t, std::vector<ScheduledSequence*>> expected_;
};

}  // namespace gpt
