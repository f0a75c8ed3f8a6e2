// serve's logic without a model or HTTP: the key/value block pool, the continuous-batching
// scheduler's plans (rows, slots, block tables, logit rows, sampling draws, chunked prefill,
// admission by blocks, pp groups, cancellation), reading completion requests (every field, its
// errors and their messages), the response objects, UTF-8 prefixes of streamed text, the request
// inbox's bound and the Prometheus text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "framework/json.h"
#include "launch/inference/kv_block_pool.h"
#include "launch/inference/prompt_text.h"
#include "launch/serving/batch_scheduler.h"
#include "launch/serving/chat_api.h"
#include "launch/serving/completion_api.h"
#include "launch/serving/served_request.h"
#include "launch/serving/serving_metrics.h"

namespace gpt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- KvBlockPool

TEST(KvBlockPool, ReserveGrowsTablesLowestBlockFirst) {
  KvBlockPool pool(4, 16);
  EXPECT_EQ(pool.total(), 4);
  EXPECT_EQ(pool.free(), 4);
  EXPECT_EQ(pool.block_tokens(), 16);
  EXPECT_EQ(pool.blocks_for(0), 0);
  EXPECT_EQ(pool.blocks_for(1), 1);
  EXPECT_EQ(pool.blocks_for(16), 1);
  EXPECT_EQ(pool.blocks_for(17), 2);

  std::vector<int32_t> a;
  EXPECT_TRUE(pool.reserve(a, 0));
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(pool.reserve(a, 17));
  EXPECT_THAT(a, ElementsAre(0, 1));
  EXPECT_EQ(pool.free(), 2);
  EXPECT_TRUE(pool.reserve(a, 32));  // already held: nothing taken
  EXPECT_THAT(a, ElementsAre(0, 1));
  EXPECT_EQ(pool.free(), 2);
  EXPECT_TRUE(pool.reserve(a, 10));  // fewer positions never shrink a table
  EXPECT_THAT(a, ElementsAre(0, 1));
  EXPECT_TRUE(pool.reserve(a, 33));  // grows by one
  EXPECT_THAT(a, ElementsAre(0, 1, 2));
  EXPECT_EQ(pool.free(), 1);
}

TEST(KvBlockPool, RefusalLeavesTheTableUnchanged) {
  KvBlockPool pool(4, 4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.reserve(a, 8));
  ASSERT_TRUE(pool.reserve(b, 1));
  EXPECT_THAT(b, ElementsAre(2));
  EXPECT_FALSE(pool.reserve(b, 12));  // needs 2 more, 1 free
  EXPECT_THAT(b, ElementsAre(2));
  EXPECT_EQ(pool.free(), 1);
  std::vector<int32_t> c;
  EXPECT_FALSE(pool.reserve(c, 5));
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(pool.free(), 1);
  EXPECT_TRUE(pool.reserve(c, 4));  // exactly the last block
  EXPECT_THAT(c, ElementsAre(3));
  EXPECT_EQ(pool.free(), 0);
  EXPECT_FALSE(pool.reserve(c, 5));
  EXPECT_THAT(c, ElementsAre(3));
}

TEST(KvBlockPool, ReleasedBlocksAreReusedLowestFirst) {
  KvBlockPool pool(5, 2);
  std::vector<int32_t> a, b, c, d;
  ASSERT_TRUE(pool.reserve(a, 2));
  ASSERT_TRUE(pool.reserve(b, 2));
  ASSERT_TRUE(pool.reserve(c, 2));
  EXPECT_THAT(a, ElementsAre(0));
  EXPECT_THAT(b, ElementsAre(1));
  EXPECT_THAT(c, ElementsAre(2));
  pool.release(c);
  EXPECT_TRUE(c.empty());
  pool.release(a);
  EXPECT_EQ(pool.free(), 4);  // 0, 2, 3, 4
  ASSERT_TRUE(pool.reserve(d, 5));
  EXPECT_THAT(d, ElementsAre(0, 2, 3));
  pool.release(b);
  pool.release(d);
  EXPECT_EQ(pool.free(), 5);
  std::vector<int32_t> all;
  ASSERT_TRUE(pool.reserve(all, 10));
  EXPECT_THAT(all, ElementsAre(0, 1, 2, 3, 4));
}

TEST(KvBlockPool, DoubleReleaseAndForeignBlocksAreErrors) {
  KvBlockPool pool(3, 4);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.reserve(a, 5));
  std::vector<int32_t> copy = a;
  pool.release(a);
  EXPECT_EQ(pool.free(), 3);
  try {
    pool.release(copy);
    FAIL() << "a double release passed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("released block 0 is not in use"));
  }
  EXPECT_EQ(pool.free(), 3);
  std::vector<int32_t> foreign = {3};
  EXPECT_THROW(pool.release(foreign), Error);
  std::vector<int32_t> negative = {-1};
  EXPECT_THROW(pool.release(negative), Error);
  EXPECT_EQ(pool.free(), 3);
  EXPECT_THROW(KvBlockPool(0, 4), Error);
  EXPECT_THROW(KvBlockPool(4, 0), Error);
}

// ---------------------------------------------------------------- BatchScheduler

std::shared_ptr<ServedRequest> request(int64_t id, std::vector<int32_t> prompt, int64_t max_tokens,
                                       uint64_t seed = 0) {
  auto r = std::make_shared<ServedRequest>();
  r->id = id;
  r->request.prompt = std::move(prompt);
  r->request.max_tokens = max_tokens;
  r->request.seed = seed;
  return r;
}

std::vector<int32_t> range(int32_t first, int32_t count) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < count; ++i) v.push_back(first + i);
  return v;
}

// Row `row`'s block table.
std::vector<int32_t> table_of(const StepPlan& plan, int64_t row, int64_t max_blocks) {
  const auto begin = plan.batch.block_tables.begin() + row * max_blocks;
  return std::vector<int32_t>(begin, begin + max_blocks);
}

void expect_consistent(const StepPlan& plan, int64_t max_blocks) {
  const int64_t rows = plan.batch.rows();
  EXPECT_EQ(static_cast<int64_t>(plan.batch.tokens.size()), rows);
  EXPECT_EQ(static_cast<int64_t>(plan.batch.slots.size()), rows);
  EXPECT_EQ(static_cast<int64_t>(plan.batch.block_tables.size()), rows * max_blocks);
  EXPECT_EQ(plan.sampling.size(), plan.batch.logit_rows.size());
  EXPECT_EQ(plan.kind, rows > 0 ? StepPlan::Kind::kRun : StepPlan::Kind::kIdle);
}

TEST(BatchScheduler, RowsOfAPlan) {
  KvBlockPool pool(8, 4);
  const SchedulerLimits limits{
      .max_rows = 256, .max_sequences = 8, .groups = 1, .seq_len = 32, .max_blocks = 4};
  BatchScheduler scheduler(limits, pool);
  EXPECT_TRUE(scheduler.idle());
  auto a = request(1, {10, 11, 12, 13, 14}, 3, 77);  // positions 0..6: 2 blocks
  a->request.sampling = SamplingOptions{.temperature = 0.5, .top_k = 7, .top_p = 0.9};
  auto b = request(2, {20, 21}, 2, 88);  // positions 0..2: 1 block
  scheduler.add(a);
  scheduler.add(b);
  EXPECT_EQ(scheduler.waiting(), 2u);

  const StepPlan p0 = scheduler.plan(0);
  expect_consistent(p0, 4);
  EXPECT_EQ(p0.kind, StepPlan::Kind::kRun);
  EXPECT_EQ(scheduler.waiting(), 0u);
  EXPECT_EQ(scheduler.running(), 2u);
  EXPECT_THAT(p0.batch.tokens, ElementsAre(10, 11, 12, 13, 14, 20, 21));
  EXPECT_THAT(p0.batch.positions, ElementsAre(0, 1, 2, 3, 4, 0, 1));
  // a holds blocks 0 and 1, b block 2: slot = block * 4 + position % 4.
  EXPECT_THAT(p0.batch.slots, ElementsAre(0, 1, 2, 3, 4, 8, 9));
  for (int64_t row = 0; row < 5; ++row)
    EXPECT_THAT(table_of(p0, row, 4), ElementsAre(0, 1, -1, -1)) << "row " << row;
  for (int64_t row = 5; row < 7; ++row)
    EXPECT_THAT(table_of(p0, row, 4), ElementsAre(2, -1, -1, -1)) << "row " << row;
  EXPECT_THAT(p0.batch.logit_rows, ElementsAre(4, 6));
  ASSERT_EQ(p0.sampling.size(), 2u);
  EXPECT_EQ(p0.sampling[0].options.temperature, 0.5);
  EXPECT_EQ(p0.sampling[0].options.top_k, 7);
  EXPECT_EQ(p0.sampling[0].options.top_p, 0.9);
  EXPECT_EQ(p0.sampling[0].seed, 77u);
  EXPECT_EQ(p0.sampling[0].draw, 0u);
  EXPECT_EQ(p0.sampling[1].seed, 88u);
  EXPECT_EQ(p0.sampling[1].draw, 0u);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 3.0 / 8.0);

  // Nothing more to run until the tokens are back.
  EXPECT_TRUE(scheduler.in_flight());
  const StepPlan waiting = scheduler.plan(1);
  EXPECT_EQ(waiting.kind, StepPlan::Kind::kIdle);
  EXPECT_EQ(waiting.batch.rows(), 0);
  EXPECT_TRUE(scheduler.take_expected(1).empty());

  std::vector<ScheduledSequence*> sampled = scheduler.take_expected(0);
  EXPECT_FALSE(scheduler.in_flight());
  EXPECT_TRUE(scheduler.take_expected(0).empty());  // taken once
  ASSERT_EQ(sampled.size(), 2u);
  EXPECT_EQ(sampled[0]->request, a);
  EXPECT_EQ(sampled[1]->request, b);
  EXPECT_EQ(sampled[0]->prompt_length, 5);
  EXPECT_EQ(sampled[0]->cached, 5);
  EXPECT_THAT(sampled[0]->table, ElementsAre(0, 1));
  sampled[0]->tokens.push_back(50);
  sampled[1]->tokens.push_back(60);

  // Decode rows: the last sampled token at the next position; the draw counts the tokens so far.
  const StepPlan p2 = scheduler.plan(2);
  expect_consistent(p2, 4);
  EXPECT_THAT(p2.batch.tokens, ElementsAre(50, 60));
  EXPECT_THAT(p2.batch.positions, ElementsAre(5, 2));
  EXPECT_THAT(p2.batch.slots, ElementsAre(5, 10));
  EXPECT_THAT(table_of(p2, 0, 4), ElementsAre(0, 1, -1, -1));
  EXPECT_THAT(table_of(p2, 1, 4), ElementsAre(2, -1, -1, -1));
  EXPECT_THAT(p2.batch.logit_rows, ElementsAre(0, 1));
  ASSERT_EQ(p2.sampling.size(), 2u);
  EXPECT_EQ(p2.sampling[0].draw, 1u);
  EXPECT_EQ(p2.sampling[1].draw, 1u);
  sampled = scheduler.take_expected(2);
  ASSERT_EQ(sampled.size(), 2u);
  sampled[0]->tokens.push_back(51);
  EXPECT_EQ(sampled[0]->generated(), 2);
  // b has its 2 tokens: it ends, and its block is free again.
  sampled[1]->tokens.push_back(61);
  scheduler.finish(sampled[1]);
  EXPECT_EQ(scheduler.running(), 1u);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 2.0 / 8.0);

  const StepPlan p3 = scheduler.plan(3);
  EXPECT_THAT(p3.batch.tokens, ElementsAre(51));
  EXPECT_THAT(p3.batch.positions, ElementsAre(6));
  EXPECT_THAT(p3.batch.slots, ElementsAre(6));
  ASSERT_EQ(p3.sampling.size(), 1u);
  EXPECT_EQ(p3.sampling[0].draw, 2u);
  sampled = scheduler.take_expected(3);
  ASSERT_EQ(sampled.size(), 1u);
  scheduler.finish(sampled[0]);
  EXPECT_TRUE(scheduler.idle());
  EXPECT_EQ(scheduler.kv_usage(), 0.0);
  EXPECT_EQ(scheduler.plan(4).kind, StepPlan::Kind::kIdle);
}

TEST(BatchScheduler, ChunkedPrefillWithinTheRowBudgetDecodesFirst) {
  KvBlockPool pool(16, 4);
  const SchedulerLimits limits{
      .max_rows = 4, .max_sequences = 8, .groups = 1, .seq_len = 64, .max_blocks = 3};
  BatchScheduler scheduler(limits, pool);
  auto a = request(1, {1, 2}, 4);         // positions 0..4: blocks 0, 1
  auto b = request(2, range(100, 7), 2);  // positions 0..7: blocks 2, 3
  auto c = request(3, range(200, 3), 1);  // positions 0..2: block 4
  scheduler.add(a);
  scheduler.add(b);

  const StepPlan p0 = scheduler.plan(0);
  expect_consistent(p0, 3);
  EXPECT_THAT(p0.batch.tokens, ElementsAre(1, 2, 100, 101));
  EXPECT_THAT(p0.batch.positions, ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(p0.batch.slots, ElementsAre(0, 1, 8, 9));
  EXPECT_THAT(table_of(p0, 2, 3), ElementsAre(2, 3, -1));
  EXPECT_THAT(p0.batch.logit_rows, ElementsAre(1));  // b's prompt is not done
  std::vector<ScheduledSequence*> sampled = scheduler.take_expected(0);
  ASSERT_EQ(sampled.size(), 1u);
  EXPECT_EQ(sampled[0]->request, a);
  sampled[0]->tokens.push_back(50);
  scheduler.add(c);

  // a's decode row first, then b's next chunk; no budget left for c.
  const StepPlan p1 = scheduler.plan(1);
  expect_consistent(p1, 3);
  EXPECT_THAT(p1.batch.tokens, ElementsAre(50, 102, 103, 104));
  EXPECT_THAT(p1.batch.positions, ElementsAre(2, 2, 3, 4));
  EXPECT_THAT(p1.batch.slots, ElementsAre(2, 10, 11, 12));
  EXPECT_THAT(p1.batch.logit_rows, ElementsAre(0));
  ASSERT_EQ(p1.sampling.size(), 1u);
  EXPECT_EQ(p1.sampling[0].draw, 1u);
  EXPECT_EQ(scheduler.waiting(), 1u);
  sampled = scheduler.take_expected(1);
  ASSERT_EQ(sampled.size(), 1u);
  sampled[0]->tokens.push_back(51);

  // a, the end of b's prompt (its logits), then c admitted with the one row left.
  const StepPlan p2 = scheduler.plan(2);
  expect_consistent(p2, 3);
  EXPECT_THAT(p2.batch.tokens, ElementsAre(51, 105, 106, 200));
  EXPECT_THAT(p2.batch.positions, ElementsAre(3, 5, 6, 0));
  EXPECT_THAT(p2.batch.slots, ElementsAre(3, 13, 14, 16));
  EXPECT_THAT(table_of(p2, 3, 3), ElementsAre(4, -1, -1));
  EXPECT_THAT(p2.batch.logit_rows, ElementsAre(0, 2));
  ASSERT_EQ(p2.sampling.size(), 2u);
  EXPECT_EQ(p2.sampling[0].draw, 2u);
  EXPECT_EQ(p2.sampling[1].draw, 0u);
  EXPECT_EQ(scheduler.waiting(), 0u);
  EXPECT_EQ(scheduler.running(), 3u);
  sampled = scheduler.take_expected(2);
  ASSERT_EQ(sampled.size(), 2u);
  EXPECT_EQ(sampled[0]->request, a);
  EXPECT_EQ(sampled[1]->request, b);
}

TEST(BatchScheduler, AdmissionWaitsForBlocksInArrivalOrder) {
  KvBlockPool pool(4, 4);
  const SchedulerLimits limits{
      .max_rows = 64, .max_sequences = 8, .groups = 1, .seq_len = 16, .max_blocks = 4};
  BatchScheduler scheduler(limits, pool);
  auto a = request(1, range(0, 8), 5);  // positions 0..11: 3 blocks
  auto b = request(2, range(0, 4), 4);  // positions 0..6: 2 blocks, only 1 free
  auto c = request(3, {9}, 1);          // 1 block: would fit, but b came first
  scheduler.add(a);
  scheduler.add(b);
  scheduler.add(c);
  const StepPlan p0 = scheduler.plan(0);
  EXPECT_EQ(p0.batch.rows(), 8);
  EXPECT_EQ(scheduler.running(), 1u);
  EXPECT_EQ(scheduler.waiting(), 2u);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 0.75);
  std::vector<ScheduledSequence*> sampled = scheduler.take_expected(0);
  ASSERT_EQ(sampled.size(), 1u);
  EXPECT_THAT(sampled[0]->table, ElementsAre(0, 1, 2));
  sampled[0]->tokens.push_back(1);

  // Still short: a decodes alone.
  const StepPlan p1 = scheduler.plan(1);
  EXPECT_EQ(p1.batch.rows(), 1);
  EXPECT_EQ(scheduler.waiting(), 2u);
  sampled = scheduler.take_expected(1);
  ASSERT_EQ(sampled.size(), 1u);
  scheduler.finish(sampled[0]);
  EXPECT_EQ(scheduler.kv_usage(), 0.0);

  // a's blocks are back: b and c are admitted, lowest blocks first.
  const StepPlan p2 = scheduler.plan(2);
  expect_consistent(p2, 4);
  EXPECT_THAT(p2.batch.tokens, ElementsAre(0, 1, 2, 3, 9));
  EXPECT_THAT(p2.batch.slots, ElementsAre(0, 1, 2, 3, 8));
  EXPECT_THAT(table_of(p2, 0, 4), ElementsAre(0, 1, -1, -1));
  EXPECT_THAT(table_of(p2, 4, 4), ElementsAre(2, -1, -1, -1));
  EXPECT_THAT(p2.batch.logit_rows, ElementsAre(3, 4));
  EXPECT_EQ(scheduler.waiting(), 0u);
  EXPECT_EQ(scheduler.running(), 2u);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 0.75);
}

TEST(BatchScheduler, MaxSequencesBoundsAdmission) {
  KvBlockPool pool(16, 4);
  const SchedulerLimits limits{
      .max_rows = 64, .max_sequences = 2, .groups = 1, .seq_len = 16, .max_blocks = 4};
  BatchScheduler scheduler(limits, pool);
  for (int64_t i = 0; i < 3; ++i) scheduler.add(request(i, {1, 2}, 2));
  const StepPlan p0 = scheduler.plan(0);
  EXPECT_EQ(p0.batch.rows(), 4);
  EXPECT_EQ(scheduler.running(), 2u);
  EXPECT_EQ(scheduler.waiting(), 1u);
}

TEST(BatchScheduler, GroupsArePlannedInTurn) {
  KvBlockPool pool(16, 4);
  // pp 2: up to one sequence per group.
  const SchedulerLimits limits{
      .max_rows = 64, .max_sequences = 2, .groups = 2, .seq_len = 16, .max_blocks = 4};
  BatchScheduler scheduler(limits, pool);
  auto a = request(1, {1, 2, 3}, 4);
  auto b = request(2, {4, 5}, 4);
  scheduler.add(a);
  scheduler.add(b);
  const StepPlan p0 = scheduler.plan(0);  // group 0: a only, b does not fit the group
  EXPECT_THAT(p0.batch.tokens, ElementsAre(1, 2, 3));
  EXPECT_EQ(scheduler.waiting(), 1u);
  const StepPlan p1 = scheduler.plan(1);  // group 1 admits b; a's tokens are in flight
  EXPECT_THAT(p1.batch.tokens, ElementsAre(4, 5));
  EXPECT_THAT(p1.batch.slots, ElementsAre(8, 9));  // a holds blocks 0, 1
  EXPECT_EQ(scheduler.waiting(), 0u);

  std::vector<ScheduledSequence*> sa = scheduler.take_expected(0);
  ASSERT_EQ(sa.size(), 1u);
  EXPECT_EQ(sa[0]->group, 0);
  sa[0]->tokens.push_back(30);
  std::vector<ScheduledSequence*> sb = scheduler.take_expected(1);
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sb[0]->group, 1);
  sb[0]->tokens.push_back(40);

  // Even steps run a, odd steps b, never both.
  const StepPlan p2 = scheduler.plan(2);
  EXPECT_THAT(p2.batch.tokens, ElementsAre(30));
  EXPECT_THAT(p2.batch.positions, ElementsAre(3));
  const StepPlan p3 = scheduler.plan(3);
  EXPECT_THAT(p3.batch.tokens, ElementsAre(40));
  EXPECT_THAT(p3.batch.positions, ElementsAre(2));
  sa = scheduler.take_expected(2);
  ASSERT_EQ(sa.size(), 1u);
  sa[0]->tokens.push_back(31);
  // b's token of step 3 is not back yet: step 5 (its group) has nothing, step 4 has a.
  const StepPlan p4 = scheduler.plan(4);
  EXPECT_THAT(p4.batch.tokens, ElementsAre(31));
  const StepPlan p5 = scheduler.plan(5);
  EXPECT_EQ(p5.kind, StepPlan::Kind::kIdle);
  EXPECT_EQ(scheduler.take_expected(3).size(), 1u);
}

TEST(BatchScheduler, CancelledRequestsLeaveAndFreeTheirBlocks) {
  KvBlockPool pool(8, 4);
  const SchedulerLimits limits{
      .max_rows = 64, .max_sequences = 4, .groups = 2, .seq_len = 16, .max_blocks = 4};
  BatchScheduler scheduler(limits, pool);
  auto a = request(1, range(0, 6), 3);  // 2 blocks, group 0
  scheduler.add(a);
  scheduler.plan(0);
  auto b = request(2, {1}, 4);  // 1 block, group 1
  scheduler.add(b);
  scheduler.plan(1);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 3.0 / 8.0);
  auto w = request(3, range(0, 16), 1);  // waits for the next plan
  scheduler.add(w);
  {
    std::lock_guard<std::mutex> lock(a->mutex);
    a->cancelled = true;
  }
  {
    std::lock_guard<std::mutex> lock(w->mutex);
    w->cancelled = true;
  }
  // Step 1 is group 1's: the waiting request leaves, a (group 0) stays until its turn.
  std::vector<std::shared_ptr<ServedRequest>> dropped = scheduler.drop_cancelled(1);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], w);
  EXPECT_EQ(scheduler.waiting(), 0u);
  EXPECT_EQ(scheduler.running(), 2u);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 3.0 / 8.0);
  // Group 0's turn (its tokens taken): a leaves, its 2 blocks are free.
  scheduler.take_expected(0);
  dropped = scheduler.drop_cancelled(2);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], a);
  EXPECT_EQ(scheduler.running(), 1u);
  EXPECT_DOUBLE_EQ(scheduler.kv_usage(), 1.0 / 8.0);
  EXPECT_TRUE(scheduler.drop_cancelled(3).empty());
  // The freed blocks go to the next admission.
  auto d = request(4, range(0, 5), 2);
  scheduler.add(d);
  const StepPlan p2 = scheduler.plan(2);
  EXPECT_THAT(table_of(p2, 0, 4), ElementsAre(0, 1, -1, -1));

  // cancel_all marks everything; the next drops take them out.
  auto e = request(5, {1}, 1);
  scheduler.add(e);
  scheduler.cancel_all();
  for (const auto& r : {b, d, e}) {
    std::lock_guard<std::mutex> lock(r->mutex);
    EXPECT_TRUE(r->cancelled) << r->id;
  }
  EXPECT_EQ(scheduler.drop_cancelled(4).size(), 2u);  // e waiting, d of group 0
  EXPECT_EQ(scheduler.drop_cancelled(5).size(), 1u);  // b of group 1
  EXPECT_TRUE(scheduler.idle());
  EXPECT_EQ(scheduler.kv_usage(), 0.0);
}

TEST(BatchScheduler, RefusesBadLimits) {
  KvBlockPool pool(4, 4);
  EXPECT_THROW(BatchScheduler(SchedulerLimits{.seq_len = 0, .max_blocks = 4}, pool), Error);
  EXPECT_THROW(BatchScheduler(SchedulerLimits{.groups = 0, .seq_len = 8, .max_blocks = 4}, pool),
               Error);
  EXPECT_THROW(BatchScheduler(SchedulerLimits{.max_rows = 0, .seq_len = 8, .max_blocks = 4}, pool),
               Error);
}

// ---------------------------------------------------------------- parse_completion_request

const ApiModel kModel{.name = "tiny", .seq_len = 32, .vocab_size = 100, .has_token = {}};
constexpr uint64_t kDefaultSeed = 1234;

// One token per byte (its value); "bad" in the text is an input error.
std::vector<int32_t> tokenize(const std::string& text) {
  if (text.find("bad") != std::string::npos) throw Error("not UTF-8 at byte 3");
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<unsigned char>(c) % 100);
  return ids;
}

CompletionRequest parse(const std::string& body) {
  return parse_completion_request(body, kModel, tokenize, kDefaultSeed);
}

// The ApiError that `body` gives (a failure when it is accepted).
ApiError error_of(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "");
}

void expect_400(const std::string& body, const std::string& message, const std::string& param) {
  const ApiError e = error_of(body);
  EXPECT_EQ(e.status, 400) << body;
  EXPECT_EQ(e.type, "invalid_request_error") << body;
  EXPECT_EQ(std::string(e.what()), message) << body;
  EXPECT_EQ(e.param, param) << body;
}

TEST(CompletionRequest, Defaults) {
  const CompletionRequest r = parse(R"({"prompt": "abc"})");
  EXPECT_THAT(r.prompt, ElementsAre(97, 98, 99));
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.top_p, 1.0);
  EXPECT_EQ(r.seed, kDefaultSeed);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(CompletionRequest, EveryField) {
  const CompletionRequest r = parse(R"({"model": "tiny", "prompt": "hi", "max_tokens": 5,
      "temperature": 0.25, "top_p": 0.5, "top_k": 7, "seed": 18446744073709551615,
      "stop": ["x", "yz"], "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_THAT(r.prompt, ElementsAre(4, 5));  // 'h' 104, 'i' 105
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.sampling.temperature, 0.25);
  EXPECT_EQ(r.sampling.top_p, 0.5);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.seed, UINT64_MAX);
  EXPECT_THAT(r.stop, ElementsAre("x", "yz"));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);

  // null is the default for every field.
  const CompletionRequest n = parse(R"({"model": "tiny", "prompt": "hi", "max_tokens": null,
      "temperature": null, "top_p": null, "top_k": null, "seed": null, "stop": null,
      "stream": null, "stream_options": null})");
  EXPECT_EQ(n.max_tokens, 16);
  EXPECT_EQ(n.sampling.temperature, 1.0);
  EXPECT_EQ(n.seed, kDefaultSeed);
  EXPECT_TRUE(n.stop.empty());
  EXPECT_FALSE(n.stream);

  EXPECT_THAT(parse(R"({"prompt": "a", "stop": "\n"})").stop, ElementsAre("\n"));
  EXPECT_EQ(parse(R"({"prompt": "a", "seed": 0})").seed, 0u);
  EXPECT_EQ(parse(R"({"prompt": "a", "temperature": 0})").sampling.temperature, 0.0);
  EXPECT_EQ(parse(R"({"prompt": "a", "temperature": 2})").sampling.temperature, 2.0);
  EXPECT_EQ(parse(R"({"prompt": "a", "top_p": 1})").sampling.top_p, 1.0);
  EXPECT_EQ(parse(R"({"prompt": "a", "top_k": 0})").sampling.top_k, 0);
  EXPECT_EQ(parse(R"({"prompt": "a", "top_k": -1})").sampling.top_k, 0);  // -1: all
  EXPECT_FALSE(parse(R"({"prompt": "a", "stream_options": {}})").include_usage);
  EXPECT_FALSE(
      parse(R"({"prompt": "a", "stream_options": {"include_usage": false}})").include_usage);
}

TEST(CompletionRequest, Model) {
  const ApiError e = error_of(R"({"model": "gpt-4", "prompt": "a"})");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.type, "not_found_error");
  EXPECT_EQ(std::string(e.what()), "the model \"gpt-4\" does not exist (this server has 'tiny')");
  EXPECT_EQ(e.param, "model");
  expect_400(R"({"model": 5, "prompt": "a"})", "'model' must be a string (found 5)", "model");
  // null is no model named, as null is the default of every other field.
  EXPECT_THAT(parse(R"({"model": null, "prompt": [5]})").prompt, ElementsAre(5));
}

TEST(CompletionRequest, Prompt) {
  EXPECT_THAT(parse(R"({"prompt": [5, 0, 99]})").prompt, ElementsAre(5, 0, 99));
  expect_400(R"({"max_tokens": 1})", "'prompt' is required", "prompt");
  expect_400(R"({"prompt": ""})", "'prompt' has no tokens", "prompt");
  expect_400(R"({"prompt": "a bad one"})", "prompt: not UTF-8 at byte 3", "prompt");
  expect_400(R"({"prompt": [1, 100]})", "prompt token 100 is not in [0, 100)", "prompt");
  expect_400(R"({"prompt": [-1]})", "prompt token -1 is not in [0, 100)", "prompt");
  expect_400(R"({"prompt": [1, 2.5]})", "'prompt' as token ids must be an array of integers",
             "prompt");
  expect_400(R"({"prompt": [1, "a"]})", "'prompt' as token ids must be an array of integers",
             "prompt");
  expect_400(R"({"prompt": [4294967296]})", "'prompt' as token ids must be an array of integers",
             "prompt");
  const std::string one_per_request =
      "'prompt' must be a string or an array of token ids (one prompt per request)";
  expect_400(R"({"prompt": []})", one_per_request, "prompt");
  expect_400(R"({"prompt": ["a", "b"]})", one_per_request, "prompt");
  expect_400(R"({"prompt": [[1, 2]]})", one_per_request, "prompt");
  expect_400(R"({"prompt": 5})", "'prompt' must be a string or an array of token ids (found 5)",
             "prompt");
  expect_400(R"({"prompt": {"text": "a"}})",
             "'prompt' must be a string or an array of token ids (found an object)", "prompt");
  expect_400(R"({"prompt": null})",
             "'prompt' must be a string or an array of token ids (found a null)", "prompt");
}

TEST(CompletionRequest, MaxTokensAndTheContext) {
  EXPECT_EQ(parse(R"({"prompt": "a", "max_tokens": 1})").max_tokens, 1);
  expect_400(R"({"prompt": "a", "max_tokens": 0})", "'max_tokens' must be at least 1",
             "max_tokens");
  expect_400(R"({"prompt": "a", "max_tokens": -3})", "'max_tokens' must be at least 1",
             "max_tokens");
  expect_400(R"({"prompt": "a", "max_tokens": 2.5})",
             "'max_tokens' must be a 64-bit integer (found 2.5)", "max_tokens");
  expect_400(R"({"prompt": "a", "max_tokens": "4"})",
             "'max_tokens' must be a 64-bit integer (found a string)", "max_tokens");
  // prompt + max_tokens may fill the context (32) exactly, not more.
  EXPECT_EQ(parse(R"({"prompt": ")" + std::string(28, 'a') + R"(", "max_tokens": 4})").max_tokens,
            4);
  expect_400(R"({"prompt": ")" + std::string(28, 'a') + R"(", "max_tokens": 5})",
             "the prompt's 28 tokens and max_tokens 5 exceed the model's context of 32 tokens",
             "max_tokens");
  // The default max_tokens (16) counts too.
  expect_400(R"({"prompt": ")" + std::string(20, 'a') + R"("})",
             "the prompt's 20 tokens and max_tokens 16 exceed the model's context of 32 tokens",
             "max_tokens");
  expect_400(R"({"prompt": ")" + std::string(33, 'a') + R"(", "max_tokens": 1})",
             "the prompt's 33 tokens and max_tokens 1 exceed the model's context of 32 tokens",
             "prompt");
  // The largest 64-bit max_tokens: a sum with the prompt would wrap negative and pass.
  expect_400(R"({"prompt": "a", "max_tokens": 9223372036854775807})",
             "the prompt's 1 tokens and max_tokens 9223372036854775807 exceed the model's "
             "context of 32 tokens",
             "max_tokens");
}

// A generated id the tokenizer lacks adds no text, as Hugging Face's decode skips it.
TEST(ContinuationText, IdsTheTokenizerLacksAddNoText) {
  const TextTokenizer bytes("bytes", Gpt2Files{});
  EXPECT_TRUE(bytes.has_token(255));
  EXPECT_FALSE(bytes.has_token(256));
  EXPECT_FALSE(bytes.has_token(-1));
  EXPECT_EQ(continuation_text(bytes, {'1', '+'}, {'2', 300, '='}), "2=");
  EXPECT_EQ(continuation_text(bytes, {'1'}, {300}), "");
}

// An id the embedding has but the tokenizer lacks (Qwen's files pad the embedding): a 400 at
// once, not a failure of the step loop when the text is decoded.
TEST(CompletionRequest, PromptIdsTheTokenizerLacks) {
  ApiModel padded = kModel;
  padded.has_token = [](int64_t id) { return id < 90; };
  EXPECT_EQ(parse_completion_request(R"({"prompt": [1, 89]})", padded, tokenize, 1).prompt,
            std::vector<int32_t>({1, 89}));
  try {
    parse_completion_request(R"({"prompt": [1, 95]})", padded, tokenize, 1);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "prompt");
    EXPECT_THAT(e.what(), HasSubstr("prompt token 95 is not in the tokenizer's vocabulary"));
  }
}

TEST(CompletionRequest, SamplingFields) {
  expect_400(R"({"prompt": "a", "temperature": 2.01})", "'temperature' must be in [0, 2]",
             "temperature");
  expect_400(R"({"prompt": "a", "temperature": -0.1})", "'temperature' must be in [0, 2]",
             "temperature");
  expect_400(R"({"prompt": "a", "temperature": "hot"})",
             "'temperature' must be a number (found a string)", "temperature");
  expect_400(R"({"prompt": "a", "top_p": 0})", "'top_p' must be in (0, 1]", "top_p");
  expect_400(R"({"prompt": "a", "top_p": 1.5})", "'top_p' must be in (0, 1]", "top_p");
  expect_400(R"({"prompt": "a", "top_p": true})", "'top_p' must be a number (found a boolean)",
             "top_p");
  expect_400(R"({"prompt": "a", "top_k": -2})", "'top_k' must be at least 0 (0 or -1: all)",
             "top_k");
  expect_400(R"({"prompt": "a", "top_k": 1.5})", "'top_k' must be a 64-bit integer (found 1.5)",
             "top_k");
  expect_400(R"({"prompt": "a", "seed": -1})",
             "'seed' must be a 64-bit unsigned integer (found -1)", "seed");
  expect_400(R"({"prompt": "a", "seed": 1.5})",
             "'seed' must be a 64-bit unsigned integer (found 1.5)", "seed");
}

TEST(CompletionRequest, StopAndStream) {
  EXPECT_EQ(parse(R"({"prompt": "a", "stop": ["1", "2", "3", "4"]})").stop.size(), 4u);
  expect_400(R"({"prompt": "a", "stop": ["1", "2", "3", "4", "5"]})",
             "'stop' takes at most 4 strings", "stop");
  expect_400(R"({"prompt": "a", "stop": ""})", "each 'stop' string must have 1 to 256 bytes",
             "stop");
  expect_400(R"({"prompt": "a", "stop": ["x", ""]})", "each 'stop' string must have 1 to 256 bytes",
             "stop");
  EXPECT_EQ(parse(R"({"prompt": "a", "stop": ")" + std::string(256, 's') + R"("})").stop[0].size(),
            256u);
  expect_400(R"({"prompt": "a", "stop": ")" + std::string(257, 's') + R"("})",
             "each 'stop' string must have 1 to 256 bytes", "stop");
  expect_400(R"({"prompt": "a", "stop": [1]})", "'stop' must be a string or an array of strings",
             "stop");
  expect_400(R"({"prompt": "a", "stop": 1})", "'stop' must be a string or an array of strings",
             "stop");
  expect_400(R"({"prompt": "a", "stream": "yes"})", "'stream' must be a boolean (found a string)",
             "stream");
  expect_400(R"({"prompt": "a", "stream": 1})", "'stream' must be a boolean (found 1)", "stream");
  expect_400(R"({"prompt": "a", "stream_options": []})", "'stream_options' must be an object",
             "stream_options");
  expect_400(R"({"prompt": "a", "stream_options": {"include_usage": 1}})",
             "'stream_options.include_usage' must be a boolean", "stream_options");
  expect_400(R"({"prompt": "a", "stream_options": {"continuous_usage_stats": true}})",
             "unknown field stream_options.\"continuous_usage_stats\"", "stream_options");
}

TEST(CompletionRequest, NeutralOnlyFields) {
  // OpenAI's fields that serve does not implement pass at their neutral values only.
  EXPECT_NO_THROW(parse(R"({"prompt": "a", "n": 1, "best_of": 1, "echo": false, "logprobs": null,
      "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}, "suffix": "",
      "user": "someone"})"));
  EXPECT_NO_THROW(parse(R"({"prompt": "a", "n": null, "best_of": null, "echo": null,
      "presence_penalty": null, "frequency_penalty": null, "logit_bias": null, "suffix": null,
      "user": null})"));
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"n", "2"},
      {"n", "true"},
      {"best_of", "3"},
      {"echo", "true"},
      {"logprobs", "5"},
      {"logprobs", "0"},
      {"presence_penalty", "0.5"},
      {"presence_penalty", "\"0\""},
      {"frequency_penalty", "-1"},
      {"logit_bias", R"({"50256": -100})"},
      {"logit_bias", "[]"},
      {"suffix", "\"x\""}};
  for (const auto& [key, value] : refused)
    expect_400(R"({"prompt": "a", ")" + key + "\": " + value + "}",
               "'" + key + "' is not supported by this server (leave it out)", key);
}

TEST(CompletionRequest, UnknownFieldsAndMalformedBodies) {
  expect_400(R"({"prompt": "a", "max_token": 5})",
             "unknown field \"max_token\" (see docs/SERVING.md for the fields)", "max_token");
  // A long or control-character name is quoted and cut, in the message and in param.
  const ApiError e = error_of(R"({"prompt": "a", ")" + std::string(60, 'k') + R"(\n": 1})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(std::string(e.what()), "unknown field \"" + std::string(40, 'k') +
                                       "\"... (see docs/SERVING.md for the fields)");
  EXPECT_EQ(e.param, std::string(40, 'k') + "...");
  expect_400("", "the request body: not valid JSON", "");
  expect_400(R"({"prompt": "a")", "the request body: not valid JSON", "");
  expect_400(R"(["prompt", "a"])", "the request body: not a JSON object", "");
  expect_400(R"("prompt")", "the request body: not a JSON object", "");
  // Nesting deeper than 64 levels is refused before it is parsed (any field).
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  expect_400(R"({"prompt": "a", "logit_bias": )" + deep + "}",
             "the request body: JSON nested deeper than 64 levels", "");
  const std::string ok_depth = std::string(63, '[') + std::string(63, ']');
  expect_400(R"({"prompt": "a", "logit_bias": )" + ok_depth + "}",
             "'logit_bias' is not supported by this server (leave it out)", "logit_bias");
}

// ---------------------------------------------------------------- response objects

TEST(CompletionResponse, Objects) {
  const Json error =
      Json::parse(error_json(ApiError(404, "not_found_error", "no such model", "model")));
  EXPECT_EQ(error["error"]["message"], "no such model");
  EXPECT_EQ(error["error"]["type"], "not_found_error");
  EXPECT_EQ(error["error"]["param"], "model");
  EXPECT_EQ(error["error"]["code"], 404);
  EXPECT_TRUE(Json::parse(error_json(ApiError(400, "invalid_request_error", "x")))["error"]["param"]
                  .is_null());

  const Json done =
      Json::parse(completion_json(false, "cmpl-1", 1700000000, kModel, "hello", "length", 3, 2));
  EXPECT_EQ(done["id"], "cmpl-1");
  EXPECT_EQ(done["object"], "text_completion");
  EXPECT_EQ(done["created"], 1700000000);
  EXPECT_EQ(done["model"], "tiny");
  ASSERT_EQ(done["choices"].size(), 1u);
  EXPECT_EQ(done["choices"][0]["index"], 0);
  EXPECT_EQ(done["choices"][0]["text"], "hello");
  EXPECT_TRUE(done["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(done["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(done["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(done["usage"]["completion_tokens"], 2);
  EXPECT_EQ(done["usage"]["total_tokens"], 5);
  // Bytes that are not UTF-8 are replaced, never an exception.
  const Json bytes = Json::parse(completion_json(false, "c", 0, kModel, "a\xff", "stop", 1, 1));
  EXPECT_EQ(bytes["choices"][0]["text"], "a\xef\xbf\xbd");

  const std::string chunk = chunk_event(false, "c", 5, kModel, "tok", "");
  ASSERT_TRUE(chunk.starts_with("data: "));
  ASSERT_TRUE(chunk.ends_with("\n\n"));
  const Json c = Json::parse(chunk.substr(6));
  EXPECT_EQ(c["choices"][0]["text"], "tok");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(c.contains("usage"));
  EXPECT_EQ(
      Json::parse(
          chunk_event(false, "c", 5, kModel, "", "stop").substr(6))["choices"][0]["finish_reason"],
      "stop");
  const std::string usage = usage_event(false, "c", 5, kModel, 4, 6);
  const Json u = Json::parse(usage.substr(6));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 10);

  const Json models = Json::parse(models_json(kModel, 9));
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 32);
}

// ---------------------------------------------------------------- complete_utf8_prefix

// ------------------------------------------------------------------- parse_chat_request

// A stand-in template: "role:content\n" per message (and "tools\n" when given), one token a byte;
// a message "raise" is refused as a template's raise_exception would be.
std::vector<int32_t> render_chat(const Json& messages, const Json* tools) {
  std::string text = tools ? "tools\n" : "";
  for (const Json& m : messages) {
    const Json content = m.value("content", Json());
    const std::string shown = content.is_string()  ? content.get<std::string>()
                              : content.is_array() ? "[parts]"
                                                   : "";
    if (shown == "raise") throw Error("chat template line 1: roles must alternate");
    text += m.at("role").get<std::string>() + ":" + shown + "\n";
  }
  return tokenize(text);
}

CompletionRequest parse_chat(const std::string& body) {
  return parse_chat_request(body, kModel, render_chat, kDefaultSeed);
}

ApiError chat_error_of(const std::string& body, const ChatPrompt& prompt = render_chat) {
  try {
    parse_chat_request(body, kModel, prompt, kDefaultSeed);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "");
}

TEST(ChatRequest, MessagesThroughTheTemplate) {
  const CompletionRequest r = parse_chat(R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.prompt, tokenize("user:hi\n"));
  // Without a bound the answer may run to the end of the context (32 positions).
  EXPECT_EQ(r.max_tokens, 32 - 8);
  EXPECT_EQ(r.seed, kDefaultSeed);
  const CompletionRequest t = parse_chat(
      R"({"messages": [{"role": "system", "content": null}, {"role": "user", "content":
      [{"type": "text", "text": "x"}]}], "tools": [], "max_completion_tokens": 3,
      "max_tokens": 9, "temperature": 0.5, "seed": 7, "stream": true,
      "stream_options": {"include_usage": true}, "n": 1, "logprobs": false,
      "top_logprobs": null, "tool_choice": "auto", "parallel_tool_calls": true, "user": "u"})");
  EXPECT_EQ(t.prompt, tokenize("tools\nsystem:\nuser:[parts]\n"));
  EXPECT_EQ(t.max_tokens, 3);  // max_completion_tokens over max_tokens
  EXPECT_EQ(t.sampling.temperature, 0.5);
  EXPECT_EQ(t.seed, 7u);
  EXPECT_TRUE(t.stream && t.include_usage);
}

TEST(ChatRequest, RefusalsNameTheField) {
  const std::vector<std::tuple<std::string, std::string, std::string>> refused = {
      {R"({})", "'messages' is required", "messages"},
      {R"({"messages": []})", "'messages' must be a non-empty array of message objects",
       "messages"},
      {R"({"messages": [1]})", "messages[0] must be an object", "messages"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role must be a string", "messages"},
      {R"({"messages": [{"role": "user", "content": 5}]})",
       "messages[0].content must be a string, null or an array of at most 256 parts", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported",
       "messages"},
      {R"({"messages": [{"role": "user", "content": "raise"}]})",
       "messages: chat template line 1: roles must alternate", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})",
       "'tools' must be an array of tool schemas", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})",
       "'n' is not supported by this server (leave it out)", "n"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})",
       "'logprobs' is not supported by this server (leave it out)", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
       "'tool_choice' is not supported by this server (leave it out)", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "prompt": "x"})",
       "unknown field \"prompt\" (see docs/SERVING.md for the fields)", "prompt"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
       "'max_completion_tokens' must be at least 1", "max_completion_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 40})",
       "the prompt's 7 tokens and max_tokens 40 exceed the model's context of 32 tokens",
       "max_tokens"}};
  for (const auto& [body, message, param] : refused) {
    const ApiError e = chat_error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(std::string(e.what()), message) << body;
    EXPECT_EQ(e.param, param) << body;
  }
  const ApiError none = chat_error_of(R"({"messages": [{"role": "user", "content": "x"}]})", {});
  EXPECT_EQ(none.status, 400);
  EXPECT_NE(std::string(none.what()).find("no chat template"), std::string::npos);
  EXPECT_EQ(chat_error_of(R"({"model": "big", "messages": []})").status, 404);
}

TEST(ChatResponse, Objects) {
  const Json done = Json::parse(completion_json(true, "chatcmpl-1", 9, kModel, "hi", "stop", 3, 2));
  EXPECT_EQ(done["object"], "chat.completion");
  EXPECT_EQ(done["choices"][0]["message"], Json({{"role", "assistant"}, {"content", "hi"}}));
  EXPECT_FALSE(done["choices"][0].contains("text"));
  EXPECT_EQ(done["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(done["usage"]["total_tokens"], 5);
  const Json first = Json::parse(chunk_event(true, "c", 5, kModel, "", "", true).substr(6));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const Json next = Json::parse(chunk_event(true, "c", 5, kModel, "lo", "").substr(6));
  EXPECT_EQ(next["choices"][0]["delta"], Json({{"content", "lo"}}));
  const Json last = Json::parse(chunk_event(true, "c", 5, kModel, "", "length").substr(6));
  EXPECT_EQ(last["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const Json usage = Json::parse(usage_event(true, "c", 5, kModel, 4, 6).substr(6));
  EXPECT_EQ(usage["object"], "chat.completion.chunk");
  EXPECT_TRUE(usage["choices"].empty());
}

TEST(CompleteUtf8Prefix, WholeAndCutCharacters) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  // 2 bytes: é = C3 A9
  EXPECT_EQ(complete_utf8_prefix("\xc3\xa9"), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab\xc3"), 2u);
  EXPECT_EQ(complete_utf8_prefix("\xc3"), 0u);
  // 3 bytes: € = E2 82 AC
  EXPECT_EQ(complete_utf8_prefix("a\xe2\x82\xac"), 4u);
  EXPECT_EQ(complete_utf8_prefix("a\xe2\x82"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xe2"), 1u);
  // 4 bytes: U+1F600 = F0 9F 98 80
  EXPECT_EQ(complete_utf8_prefix("a\xf0\x9f\x98\x80"), 5u);
  EXPECT_EQ(complete_utf8_prefix("a\xf0\x9f\x98"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xf0\x9f"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xf0"), 1u);
  EXPECT_EQ(complete_utf8_prefix("\xf0\x9f\x98"), 0u);
  // Only the last character is held back.
  EXPECT_EQ(complete_utf8_prefix("h\xc3\xa9llo \xe2\x82\xac\xf0\x9f"), 10u);
}

TEST(CompleteUtf8Prefix, InvalidBytesAreNotHeldBack) {
  // Nothing can complete them, so holding them would stall a stream forever.
  EXPECT_EQ(complete_utf8_prefix("a\x80"), 2u);          // a stray continuation byte
  EXPECT_EQ(complete_utf8_prefix("\x80\x80"), 2u);       // only continuation bytes
  EXPECT_EQ(complete_utf8_prefix("a\xff"), 2u);          // never in UTF-8
  EXPECT_EQ(complete_utf8_prefix("a\xf8\x88\x80"), 4u);  // a 5-byte lead
  EXPECT_EQ(complete_utf8_prefix("\xc3\xa9\xa9"), 3u);   // one continuation too many
  EXPECT_EQ(complete_utf8_prefix("a\x80\x80\x80\x80\x80"), 6u);
}

// ---------------------------------------------------------------- RequestInbox

TEST(RequestInbox, BoundCoversQueuedAndHeld) {
  RequestInbox inbox(2);
  auto r1 = request(1, {1}, 1), r2 = request(2, {1}, 1), r3 = request(3, {1}, 1);
  EXPECT_TRUE(inbox.push(r1));
  EXPECT_TRUE(inbox.push(r2));
  EXPECT_EQ(inbox.size(), 2u);
  EXPECT_FALSE(inbox.push(r3));
  const std::vector<std::shared_ptr<ServedRequest>> taken =
      inbox.take(std::chrono::milliseconds(0));
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0], r1);
  EXPECT_EQ(taken[1], r2);
  EXPECT_EQ(inbox.size(), 0u);
  EXPECT_FALSE(inbox.push(r3));  // taken requests still count until set_held
  inbox.set_held(1);
  EXPECT_TRUE(inbox.push(r3));
  EXPECT_FALSE(inbox.push(request(4, {1}, 1)));
  inbox.set_held(0);
  EXPECT_TRUE(inbox.push(request(4, {1}, 1)));
  EXPECT_FALSE(inbox.push(request(5, {1}, 1)));
  EXPECT_EQ(inbox.take(std::chrono::milliseconds(0)).size(), 2u);
  inbox.set_held(0);
  EXPECT_FALSE(inbox.closed());
  inbox.close();
  EXPECT_TRUE(inbox.closed());
  EXPECT_FALSE(inbox.push(request(6, {1}, 1)));
  EXPECT_EQ(inbox.size(), 0u);
}

TEST(RequestInbox, TakeWaitsForTheFirstRequest) {
  RequestInbox inbox(4);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(inbox.take(std::chrono::milliseconds(20)).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  auto r = request(1, {1}, 1);
  std::thread pusher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    inbox.push(r);
  });
  const auto taken = inbox.take(std::chrono::seconds(30));
  pusher.join();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0], r);
}

// ---------------------------------------------------------------- ServingMetrics

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ServingMetrics, CountersGaugesAndHistograms) {
  ServingMetrics metrics;
  metrics.request_finished("stop");
  metrics.request_finished("stop");
  metrics.request_finished("length");
  metrics.request_rejected(503);
  metrics.request_rejected(400);
  metrics.request_rejected(503);
  metrics.tokens(10, 5);
  metrics.tokens(3, 2);
  metrics.step(4);
  metrics.step(0);  // an idle step is no step
  metrics.step(1);
  metrics.state(3, 2, 0.25);
  metrics.first_token(0.003);
  metrics.first_token(0.25);  // on a bound: counted in its bucket
  metrics.first_token(100);
  const std::string text = metrics.text();
  ASSERT_TRUE(text.ends_with("\n"));
  const std::vector<std::string> lines = lines_of(text);
  const auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  for (const char* line : {
           "# TYPE serve_requests_total counter",
           "serve_requests_total{outcome=\"length\"} 1",
           "serve_requests_total{outcome=\"stop\"} 2",
           "serve_requests_total{outcome=\"rejected\",status=\"400\"} 1",
           "serve_requests_total{outcome=\"rejected\",status=\"503\"} 2",
           "serve_prompt_tokens_total 13",
           "serve_generation_tokens_total 7",
           "serve_steps_total 2",
           "serve_requests_waiting 3",
           "serve_requests_running 2",
           "serve_batch_rows 1",
           "serve_kv_cache_usage 0.25",
           "# TYPE serve_step_rows histogram",
           "serve_step_rows_bucket{le=\"1\"} 1",
           "serve_step_rows_bucket{le=\"2\"} 1",
           "serve_step_rows_bucket{le=\"4\"} 2",
           "serve_step_rows_bucket{le=\"1024\"} 2",
           "serve_step_rows_bucket{le=\"+Inf\"} 2",
           "serve_step_rows_sum 5",
           "serve_step_rows_count 2",
           "# TYPE serve_time_to_first_token_seconds histogram",
           "serve_time_to_first_token_seconds_bucket{le=\"0.001\"} 0",
           "serve_time_to_first_token_seconds_bucket{le=\"0.0025\"} 0",
           "serve_time_to_first_token_seconds_bucket{le=\"0.005\"} 1",
           "serve_time_to_first_token_seconds_bucket{le=\"0.1\"} 1",
           "serve_time_to_first_token_seconds_bucket{le=\"0.25\"} 2",
           "serve_time_to_first_token_seconds_bucket{le=\"60\"} 2",
           "serve_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3",
           "serve_time_to_first_token_seconds_sum 100.253",
           "serve_time_to_first_token_seconds_count 3",
           "serve_request_latency_seconds_bucket{le=\"+Inf\"} 0",
           "serve_request_latency_seconds_count 0",
       })
    EXPECT_TRUE(has(line)) << "missing: " << line << "\nin:\n" << text;

  // Every sample belongs to a family declared before it, and buckets never decrease.
  std::string family;
  int64_t previous_bucket = -1;
  for (const std::string& line : lines) {
    if (line.starts_with("# TYPE ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
      previous_bucket = -1;
      continue;
    }
    if (line.starts_with("#")) continue;
    ASSERT_FALSE(family.empty()) << line;
    EXPECT_TRUE(line.starts_with(family)) << line << " outside " << family;
    if (line.find("_bucket{") != std::string::npos) {
      const int64_t count = std::stoll(line.substr(line.rfind(' ') + 1));
      EXPECT_GE(count, previous_bucket) << line;
      previous_bucket = count;
    }
  }
}

}  // namespace
}  // namespace gpt
