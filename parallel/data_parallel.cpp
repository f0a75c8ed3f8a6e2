// Bucketed dp gradient reduction (see data_parallel.h).
#include "parallel/data_parallel.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

std::vector<StateSegment> shard_segments(const BucketPlan& plan, int dp_rank) {
  GPT_CHECK(dp_rank >= 0 && dp_rank < plan.shards,
            "dp rank " << dp_rank << " outside the plan's " << plan.shards << " shards");
  std::vector<StateSegment> segments;
  for (size_t k = plan.buckets.size(); k-- > 0;) {  // memory order
    const BucketSpan& b = plan.buckets[k];
    segments.push_back({b.offset + dp_rank * b.shard_numel, b.shard_numel, b.shard_offset});
  }
  return segments;
}

std::vector<BucketParameter> bucket_parameters(const ParameterStore& store) {
  std::vector<BucketParameter> out;
  for (const Parameter& p : store.params())
    out.push_back({p.name, p.numel(), p.own_bucket, p.weight_decay});
  return out;
}

GradientBuckets::GradientBuckets(ParameterStore& store, Communicator& dp, const BucketPlan& plan,
                                 GradReduceDtype dtype)
    : store_(store), dp_(dp), sharded_(plan.shards > 1) {
  const auto& params = store.params();
  GPT_CHECK(plan.padding_after.size() == params.size() && plan.padded_total == store.total_numel(),
            "the bucket plan is not the one the parameter store was allocated with");
  GPT_CHECK(!sharded_ || (plan.shards == dp.size() && store.optimizer_state_sharded()),
            "a sharded bucket plan needs dp = " << plan.shards << " and sharded optimizer state");
  bucket_of_param_.assign(params.size(), -1);
  for (const BucketSpan& span : plan.buckets) {
    GPT_CHECK(span.end_param > span.first_param && params[span.first_param].offset == span.offset,
              "bucket at " << span.offset << " does not match the store's layout");
    for (size_t i = span.first_param; i < span.end_param; ++i)
      bucket_of_param_[i] = static_cast<int>(buckets_.size());
    buckets_.push_back({span, 0, nullptr, nullptr});
  }
  if (dtype == GradReduceDtype::kBf16 && dp.size() > 1) {
    wire_ = DeviceArray<uint16_t>(store.backend(), plan.padded_total, MemoryCategory::kComm);
    if (sharded_)
      shard_wire_ = DeviceArray<uint16_t>(store.backend(), plan.shard_total, MemoryCategory::kComm);
  }
}

GradientBuckets::GradientBuckets(ParameterStore& store, Communicator& dp, int64_t bucket_elements)
    : GradientBuckets(store, dp,
                      plan_buckets(bucket_parameters(store), bucket_elements, dp.size(), false)) {}

void GradientBuckets::begin_step() {
  for (Bucket& b : buckets_) {
    GPT_CHECK(b.request == nullptr, "a gradient bucket is still in flight from the last step");
    b.pending = b.span.end_param - b.span.first_param;
  }
}

void GradientBuckets::post(Bucket& b) {
  if (dp_.size() == 1) return;
  float* grads = store_.grads() + b.span.offset;
  if (wire_.size() > 0) {
    uint16_t* wire = wire_.data() + b.span.offset;
    store_.backend().pack_bf16(wire, grads, b.span.numel);
    b.request = sharded_ ? dp_.ireduce_scatter_bf16(wire, shard_wire_.data() + b.span.shard_offset,
                                                    b.span.shard_numel)
                         : dp_.iall_reduce_bf16(wire, b.span.numel);
    return;
  }
  if (sharded_) {
    // This rank's shard of the dp sum lands where the optimizer reads it (update_grads).
    b.request = dp_.ireduce_scatter(grads, store_.update_grads() + b.span.shard_offset,
                                    b.span.shard_numel, ReduceOp::kSum);
  } else {
    b.request = dp_.iall_reduce(grads, b.span.numel, ReduceOp::kSum);
  }
}

void GradientBuckets::mark_ready(size_t first, size_t end) {
  for (size_t i = first; i < end; ++i) {
    Bucket& b = buckets_[static_cast<size_t>(bucket_of_param_[i])];
    GPT_CHECK(b.pending > 0, "parameter " << store_.params()[i].name << " marked ready twice");
    if (--b.pending == 0) post(b);
  }
  progress_in_flight();
}

void GradientBuckets::progress_in_flight() {
  for (Bucket& b : buckets_)
    for (const std::unique_ptr<Request>* r : {&b.request, &b.gather})
      if (*r != nullptr) (*r)->progress();
}

bool GradientBuckets::gathering() const {
  return std::any_of(buckets_.begin(), buckets_.end(),
                     [](const Bucket& b) { return b.gather != nullptr; });
}

void GradientBuckets::finish() {
  wait_all_gathered();  // parameters the forward never asked for
  for (Bucket& b : buckets_) {
    if (b.pending > 0) {  // parameters the backward never marked (none on a full stage)
      b.pending = 0;
      post(b);
    }
  }
  for (Bucket& b : buckets_) complete(b);
}

void GradientBuckets::complete(Bucket& b) {
  if (!b.request) return;
  b.request->wait();
  b.request.reset();
  if (wire_.size() == 0) return;
  Backend& backend = store_.backend();
  if (sharded_) {
    backend.unpack_bf16(store_.update_grads() + b.span.shard_offset,
                        shard_wire_.data() + b.span.shard_offset, b.span.shard_numel);
  } else {
    backend.unpack_bf16(store_.grads() + b.span.offset, wire_.data() + b.span.offset, b.span.numel);
  }
}

void GradientBuckets::post_gather() {
  GPT_CHECK(sharded_, "post_gather without sharded optimizer state");
  GPT_CHECK(!gathering(), "a parameter gather is still in flight from the last step");
  if (dp_.size() == 1) return;
  for (size_t k = buckets_.size(); k-- > 0;) {  // the forward's order
    Bucket& b = buckets_[k];
    float* bucket = store_.values() + b.span.offset;
    b.gather = dp_.iall_gather(bucket + dp_.rank() * b.span.shard_numel, bucket,
                               b.span.shard_numel);  // in place
  }
}

void GradientBuckets::wait_gather(Bucket& b) {
  if (b.gather == nullptr) return;
  b.gather->wait();
  b.gather.reset();
}

void GradientBuckets::wait_gathered(size_t first, size_t end) {
  if (first >= end || !gathering()) return;
  GPT_CHECK(end <= bucket_of_param_.size(),
            "parameters up to " << end << " of " << bucket_of_param_.size());
  // A layer's parameters lie in consecutive buckets (registration order is memory order).
  const int low = std::min(bucket_of_param_[first], bucket_of_param_[end - 1]);
  const int high = std::max(bucket_of_param_[first], bucket_of_param_[end - 1]);
  for (int k = high; k >= low; --k) wait_gather(buckets_[static_cast<size_t>(k)]);
  progress_in_flight();
}

void GradientBuckets::wait_all_gathered() {
  for (size_t k = buckets_.size(); k-- > 0;) wait_gather(buckets_[k]);
}

}  // namespace gpt
