// The dp bucket plan (see bucket_plan.h): grouping, padding and shard offsets.
#include "parallel/bucket_plan.h"

#include "framework/check.h"

namespace gpt {

BucketPlan plan_buckets(const std::vector<BucketParameter>& params, int64_t bucket_elements, int dp,
                        bool distributed_optimizer) {
  GPT_CHECK(bucket_elements >= 1, "a gradient bucket needs at least one element");
  GPT_CHECK(dp >= 1, "dp must be at least 1, got " << dp);
  const bool sharded = distributed_optimizer && dp > 1;
  BucketPlan plan;
  plan.shards = sharded ? dp : 1;
  plan.padding_after.assign(params.size(), 0);
  // The token embedding (and its tied copy on the last stage) has a bucket of its own.
  auto alone = [&](size_t i) { return sharded && params[i].own_bucket; };
  // Walk the parameters backwards: the last registered are the first the backward finishes.
  size_t end = params.size();
  while (end > 0) {
    BucketSpan b;
    b.end_param = end;
    size_t first = end;
    if (alone(end - 1)) {
      b.numel = params[--first].numel;
    } else {
      while (first > 0 && b.numel < bucket_elements && !alone(first - 1))
        b.numel += params[--first].numel;
    }
    b.first_param = first;
    b.padded_numel = (b.numel + plan.shards - 1) / plan.shards * plan.shards;
    b.shard_numel = b.padded_numel / plan.shards;
    plan.padding_after[end - 1] = b.padded_numel - b.numel;
    plan.buckets.push_back(b);
    end = first;
  }
  // Offsets in memory order: the posting order reversed.
  for (size_t k = plan.buckets.size(); k-- > 0;) {
    BucketSpan& b = plan.buckets[k];
    b.offset = plan.padded_total;
    b.shard_offset = plan.shard_total;
    plan.padded_total += b.padded_numel;
    plan.shard_total += b.shard_numel;
  }
  return plan;
}

int64_t distributed_optimizer_shard_floats(const std::vector<BucketParameter>& params,
                                           int64_t bucket_elements, int dp) {
  return plan_buckets(params, bucket_elements, dp, true).shard_total;
}

int64_t distributed_optimizer_padding_floats(const std::vector<BucketParameter>& params,
                                             int64_t bucket_elements, int dp) {
  int64_t padding = 0;
  for (int64_t p : plan_buckets(params, bucket_elements, dp, true).padding_after) padding += p;
  return padding;
}

}  // namespace gpt
