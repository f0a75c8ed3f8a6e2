// serve's continuous batching (see batch_scheduler.h).
#include "launch/serving/batch_scheduler.h"

#include <algorithm>

#include "framework/check.h"
#include "launch/inference/decode_engine.h"

namespace gpt {

BatchScheduler::BatchScheduler(const SchedulerLimits& limits, KvBlockPool& pool)
    : limits_(limits), pool_(pool) {
  GPT_CHECK(limits.max_rows >= 1 && limits.max_sequences >= 1 && limits.groups >= 1 &&
                limits.seq_len >= 1 && limits.max_blocks >= 1,
            "scheduler limits");
}

void BatchScheduler::add(std::shared_ptr<ServedRequest> request) {
  waiting_.push_back(std::move(request));
}

namespace {

// Rows of one sequence from its first uncached position: at most `budget`; the logits are wanted
// when the rows reach its last token.
void plan_rows(StepPlan& plan, ScheduledSequence& s, int64_t budget, int64_t max_blocks,
               int64_t block_tokens, std::vector<ScheduledSequence*>& sampled) {
  const int64_t total = static_cast<int64_t>(s.tokens.size());
  const int64_t count = std::min(budget, total - s.cached);
  if (count <= 0) return;
  const bool last = s.cached + count == total;
  append_sequence_rows(plan.batch, max_blocks, block_tokens, s.table, s.tokens.data() + s.cached,
                       count, s.cached, last);
  s.cached += count;
  if (!last) return;
  const CompletionRequest& r = s.request->request;
  plan.sampling.push_back(RowSampling{
      .options = r.sampling, .seed = r.seed, .draw = static_cast<uint64_t>(s.generated())});
  sampled.push_back(&s);
}

}  // namespace

StepPlan BatchScheduler::plan(int64_t step) {
  const int group = static_cast<int>(step % limits_.groups);
  StepPlan plan;
  std::vector<ScheduledSequence*> sampled;
  int64_t budget = limits_.max_rows;
  const int64_t block_tokens = pool_.block_tokens();
  // Decoding sequences first: one row each.
  for (ScheduledSequence& s : running_)
    if (s.group == group && budget > 0 && s.cached == static_cast<int64_t>(s.tokens.size()) - 1 &&
        s.cached >= s.prompt_length) {
      plan_rows(plan, s, 1, limits_.max_blocks, block_tokens, sampled);
      budget -= 1;
    }
  // Then the prompts being prefilled, oldest first.
  for (ScheduledSequence& s : running_)
    if (s.group == group && budget > 0 && s.cached < s.prompt_length) {
      const int64_t before = plan.batch.rows();
      plan_rows(plan, s, budget, limits_.max_blocks, block_tokens, sampled);
      budget -= plan.batch.rows() - before;
    }
  // Then admissions, in arrival order, while the group has room and the pool has blocks.
  const int64_t per_group = (limits_.max_sequences + limits_.groups - 1) / limits_.groups;
  int64_t in_group = std::count_if(running_.begin(), running_.end(),
                                   [&](const ScheduledSequence& s) { return s.group == group; });
  while (!waiting_.empty() && budget > 0 && in_group < per_group &&
         static_cast<int64_t>(running_.size()) < limits_.max_sequences) {
    const std::shared_ptr<ServedRequest>& request = waiting_.front();
    const CompletionRequest& r = request->request;
    const int64_t prompt = static_cast<int64_t>(r.prompt.size());
    // The last generated token is never run through the model: its key and value are not kept.
    const int64_t positions =
        std::min(limits_.seq_len, prompt + std::max<int64_t>(r.max_tokens, 1) - 1);
    std::vector<int32_t> table;
    if (!pool_.reserve(table, std::max<int64_t>(positions, prompt))) break;
    ScheduledSequence s;
    s.request = request;
    s.tokens = r.prompt;
    s.prompt_length = prompt;
    s.table = std::move(table);
    s.group = group;
    waiting_.pop_front();
    running_.push_back(std::move(s));
    ++in_group;
    const int64_t before = plan.batch.rows();
    plan_rows(plan, running_.back(), budget, limits_.max_blocks, block_tokens, sampled);
    budget -= plan.batch.rows() - before;
  }
  plan.kind = plan.batch.rows() > 0 ? StepPlan::Kind::kRun : StepPlan::Kind::kIdle;
  if (!sampled.empty()) expected_[step] = std::move(sampled);
  return plan;
}

std::vector<ScheduledSequence*> BatchScheduler::take_expected(int64_t step) {
  auto it = expected_.find(step);
  if (it == expected_.end()) return {};
  std::vector<ScheduledSequence*> sequences = std::move(it->second);
  expected_.erase(it);
  return sequences;
}

void BatchScheduler::finish(ScheduledSequence* sequence) {
  pool_.release(sequence->table);
  running_.remove_if([&](const ScheduledSequence& s) { return &s == sequence; });
}

std::vector<std::shared_ptr<ServedRequest>> BatchScheduler::drop_cancelled(int64_t step) {
  const auto cancelled = [](const std::shared_ptr<ServedRequest>& r) {
    std::lock_guard<std::mutex> lock(r->mutex);
    return r->cancelled;
  };
  std::vector<std::shared_ptr<ServedRequest>> dropped;
  for (auto it = waiting_.begin(); it != waiting_.end();)
    if (cancelled(*it)) {
      dropped.push_back(*it);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  // A running sequence of this step's group has no plan in flight: its last one's tokens are in.
  const int group = static_cast<int>(step % limits_.groups);
  for (auto it = running_.begin(); it != running_.end();)
    if (it->group == group && cancelled(it->request)) {
      dropped.push_back(it->request);
      pool_.release(it->table);
      it = running_.erase(it);
    } else {
      ++it;
    }
  return dropped;
}

void BatchScheduler::cancel_all() {
  const auto cancel = [](const std::shared_ptr<ServedRequest>& r) {
    std::lock_guard<std::mutex> lock(r->mutex);
    r->cancelled = true;
  };
  for (const auto& r : waiting_) cancel(r);
  for (const auto& s : running_) cancel(s.request);
}

}  // namespace gpt
