// GradientBuckets: buckets tile the flat gradient buffer in reverse registration order, each
// posted once its parameters are final, and after finish() every gradient is the sum over the
// dp ranks (rank-filled buffers with closed-form sums). The distributed optimizer's bucket plan
// (padding, wte alone, shard sizes), its reduce-scatter into the shards and all-gather back, and
// the mapping of a storage range onto rectangular checkpoint blocks.
#include <gtest/gtest.h>

#include <algorithm>

#include "framework/check.h"
#include "framework/parameter.h"
#include "parallel/data_parallel.h"

namespace gpt {
namespace {

ParameterSpec spec(const std::string& name, int64_t n) {
  ParameterSpec s;
  s.name = name;
  s.shape = {n};
  s.local_numel = n;
  s.slabs = {{{0}, {n}, 0}};
  return s;
}

struct Fixture {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  ParameterStore store{*backend};
  std::unique_ptr<Communicator> world = make_mpi_communicator(MPI_COMM_WORLD, "dp");
  Fixture() {
    for (int i = 0; i < 7; ++i) store.add(spec(GPT_MSG("p" << i), 3 + 5 * i));
    store.allocate();
  }
};

TEST(GradientBuckets, TileTheBufferInReverseOrder) {
  Fixture f;
  for (int64_t bucket : {1, 10, 40, 1000}) {
    GradientBuckets buckets(f.store, *f.world, bucket);
    int64_t covered = 0;
    size_t expected_end = f.store.params().size();
    for (const auto& b : buckets.buckets()) {
      EXPECT_EQ(b.span.end_param, expected_end);  // reverse registration order, no gaps
      expected_end = b.span.first_param;
      EXPECT_TRUE(b.span.numel >= bucket || b.span.first_param == 0) << "bucket " << bucket;
      EXPECT_EQ(b.span.padded_numel, b.span.numel);  // no padding without ZeRO-1
      covered += b.span.numel;
    }
    EXPECT_EQ(expected_end, 0u);
    EXPECT_EQ(covered, f.store.total_numel());
  }
  EXPECT_EQ(GradientBuckets(f.store, *f.world, 1).num_buckets(), 7);
  EXPECT_EQ(GradientBuckets(f.store, *f.world, 1000).num_buckets(), 1);
}

TEST(GradientBuckets, SumOverRanksAfterFinish) {
  Fixture f;
  const int rank = f.world->rank(), size = f.world->size();
  for (int64_t bucket : {1, 25, 1000}) {
    GradientBuckets buckets(f.store, *f.world, bucket);
    for (int step = 0; step < 2; ++step) {
      for (int64_t i = 0; i < f.store.total_numel(); ++i)
        f.store.grads()[i] = static_cast<float>(rank + 1) * static_cast<float>(i + step);
      buckets.begin_step();
      // Layers finish from the last registered to the first, two parameters at a time.
      for (size_t end = f.store.params().size(); end > 0; end -= std::min<size_t>(end, 2))
        buckets.mark_ready(end - std::min<size_t>(end, 2), end);
      buckets.finish();
      const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
      for (int64_t i = 0; i < f.store.total_numel(); ++i)
        ASSERT_EQ(f.store.grads()[i], ranks_sum * static_cast<float>(i + step)) << i;
    }
  }
}

TEST(GradientBuckets, UnmarkedParametersAreReducedByFinishAndDoubleMarksThrow) {
  Fixture f;
  GradientBuckets buckets(f.store, *f.world, 10);
  for (int64_t i = 0; i < f.store.total_numel(); ++i) f.store.grads()[i] = 1.0f;
  buckets.begin_step();
  buckets.mark_ready(6, 7);
  EXPECT_THROW(buckets.mark_ready(6, 7), Error);
  buckets.finish();
  for (int64_t i = 0; i < f.store.total_numel(); ++i)
    ASSERT_EQ(f.store.grads()[i], static_cast<float>(f.world->size()));
}

TEST(BucketPlan, PadsToMultiplesOfDpAndGivesWteItsOwnBucket) {
  // A last stage at pp > 1: wte first (the embedding's copy would be on stage 0), a tied copy last.
  const std::vector<BucketParameter> params = {
      {"wte", 13, true}, {"p1", 5}, {"p2", 6}, {"wte", 13, true}};
  const BucketPlan plain = plan_buckets(params, 8, 4, false);
  const BucketPlan zero = plan_buckets(params, 8, 4, true);
  EXPECT_EQ(plain.shards, 1);
  EXPECT_EQ(plain.padded_total, 37);
  ASSERT_EQ(zero.buckets.size(), 3u);
  EXPECT_EQ(zero.shards, 4);
  // Posting order: the tied wte alone, then p2 + p1, then wte alone.
  EXPECT_EQ(zero.buckets[0].first_param, 3u);
  EXPECT_EQ(zero.buckets[1].first_param, 1u);
  EXPECT_EQ(zero.buckets[1].end_param, 3u);
  EXPECT_EQ(zero.buckets[2].end_param, 1u);
  EXPECT_EQ(zero.padding_after, (std::vector<int64_t>{3, 0, 1, 3}));
  for (const BucketSpan& b : zero.buckets) {
    EXPECT_EQ(b.padded_numel % 4, 0);
    EXPECT_EQ(b.padded_numel - b.numel, (4 - b.numel % 4) % 4);
    EXPECT_EQ(b.shard_numel * 4, b.padded_numel);
  }
  // Both wte buckets split alike, so dp rank r's shard is the same slice on either stage.
  EXPECT_EQ(zero.buckets[0].shard_numel, zero.buckets[2].shard_numel);
  EXPECT_EQ(zero.padded_total, 44);
  EXPECT_EQ(zero.shard_total, 11);
  EXPECT_EQ(distributed_optimizer_shard_floats(params, 8, 4), 11);
  EXPECT_EQ(distributed_optimizer_padding_floats(params, 8, 4), 7);
  // A no-op at dp 1: the full count, no padding.
  EXPECT_EQ(distributed_optimizer_shard_floats(params, 8, 1), 37);
  EXPECT_EQ(distributed_optimizer_padding_floats(params, 8, 1), 0);
  // Shard segments of rank 2 in memory order: wte's, p1 + p2's, the tied wte's.
  const std::vector<StateSegment> segments = shard_segments(zero, 2);
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_EQ(segments[0].offset, 8);
  EXPECT_EQ(segments[1].offset, 16 + 6);
  EXPECT_EQ(segments[2].offset, 28 + 8);
  EXPECT_EQ(segments[2].state_offset, 4 + 3);
}

// Sharded: each rank's shard of every bucket holds the dp sum after finish(); values updated in
// the shards are everywhere once gathered: a layer's parameters as soon as wait_gathered returns
// for them (the other buckets may still be in flight), all after wait_all_gathered. At 1 rank the
// plan is not sharded.
TEST(GradientBuckets, ReduceScatterIntoShardsThenGatherValues) {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  std::unique_ptr<Communicator> dp = make_mpi_communicator(MPI_COMM_WORLD, "dp");
  const int rank = dp->rank(), size = dp->size();
  ParameterStore store(*backend);
  for (int i = 0; i < 7; ++i) store.add(spec(i == 0 ? "wte" : GPT_MSG("p" << i), 3 + 5 * i));
  const BucketPlan plan = plan_buckets(bucket_parameters(store), 20, size, true);
  store.allocate(plan.padding_after);
  if (size > 1) store.shard_optimizer_state(shard_segments(plan, rank));
  GradientBuckets buckets(store, *dp, plan);
  EXPECT_EQ(buckets.sharded(), size > 1);
  for (const Parameter& p : store.params())
    for (int64_t i = 0; i < p.numel(); ++i)
      p.grad[i] = static_cast<float>((rank + 1) * (p.offset + i));
  buckets.begin_step();
  buckets.mark_ready(3, 7);
  buckets.finish();
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  int64_t kept = 0;
  for (const Parameter& p : store.params()) {
    for (const StatePiece& piece : store.state_pieces(p)) {
      kept += piece.numel;
      for (int64_t i = 0; i < piece.numel; ++i)
        ASSERT_EQ(store.update_grads()[piece.state_offset + i],
                  ranks_sum * static_cast<float>(p.offset + piece.begin + i))
            << p.name << " element " << piece.begin + i;
    }
  }
  // Each parameter element is in exactly one rank's shard.
  double kept_sum = static_cast<double>(kept);
  dp->all_reduce(&kept_sum, 1, ReduceOp::kSum);
  int64_t all = 0;
  for (const Parameter& p : store.params()) all += p.numel();
  EXPECT_EQ(static_cast<int64_t>(kept_sum), all);
  if (size == 1) return;
  for (const StateSegment& s : store.state_segments())
    for (int64_t i = 0; i < s.numel; ++i)
      store.values()[s.offset + i] = static_cast<float>(s.offset + i);
  buckets.post_gather();
  EXPECT_TRUE(buckets.gathering());
  const Parameter& p2 = store.params()[2];
  buckets.wait_gathered(2, 3);
  for (int64_t i = 0; i < p2.numel(); ++i)
    ASSERT_EQ(p2.value[i], static_cast<float>(p2.offset + i)) << p2.name << " element " << i;
  EXPECT_TRUE(buckets.gathering()) << "p2's bucket alone was waited";
  buckets.wait_all_gathered();
  EXPECT_FALSE(buckets.gathering());
  for (int64_t i = 0; i < store.total_numel(); ++i)
    ASSERT_EQ(store.values()[i], static_cast<float>(i)) << i;
  buckets.wait_gathered(0, 7);  // nothing in flight: returns at once
}

// Every storage range of a 3-D slab maps onto blocks whose logical elements are the range's, in
// storage order.
TEST(StorageRangeSlabs, CoverTheRangeInOrder) {
  Parameter p;
  p.name = "t";
  p.shape = {4, 5, 6};
  p.local_numel = 2 + 2 * 3 * 4;  // 2 elements of padding first
  p.slabs = {{{1, 1, 2}, {2, 3, 4}, 2}};
  const std::vector<int64_t> logical = slab_logical_indices(p.slabs[0], p.shape);
  for (int64_t lo = 0; lo <= p.local_numel; ++lo) {
    for (int64_t hi = lo; hi <= p.local_numel; ++hi) {
      std::vector<int64_t> got;
      int64_t next = std::max<int64_t>(lo, 2);
      for (const Slab& s : storage_range_slabs(p, lo, hi)) {
        EXPECT_EQ(s.local_offset, next) << lo << ".." << hi;
        next += s.numel();
        for (int64_t idx : slab_logical_indices(s, p.shape)) got.push_back(idx);
      }
      const int64_t a = std::clamp<int64_t>(lo - 2, 0, 24), b = std::clamp<int64_t>(hi - 2, 0, 24);
      ASSERT_EQ(got, std::vector<int64_t>(logical.begin() + a, logical.begin() + std::max(a, b)))
          << lo << ".." << hi;
    }
  }
}

}  // namespace
}  // namespace gpt
