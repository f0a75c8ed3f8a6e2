// Data-parallel gradient reduction in buckets of the flat gradient buffer (PyTorch DDP /
// Megatron style): the buckets of a BucketPlan (bucket_plan.h: parameters grouped in reverse
// registration order, the order the backward finishes them); during the step's last backward
// each bucket's reduction is posted as soon as every parameter in it is final, so a backend with
// asynchronous communication overlaps it with the rest of the backward. finish() waits for all of
// them. Gradients arrive pre-scaled by 1/dp.
//  - Replicated optimizer: an all-reduce (sum over dp) of each bucket, in place.
//  - Distributed optimizer (ZeRO-1, the store's state sharded by shard_segments): a
//    reduce-scatter of each padded bucket into this rank's shard of update_grads(); after the
//    optimizer has updated the shards, post_gather() all-gathers them back into every replica's
//    value buffer, in place, bucket by bucket in the order the next forward reads them, and
//    returns (Megatron's overlapped parameter gather). The forward waits for the buckets of each
//    layer just before it runs (wait_gathered), driving the others on; whatever reads the
//    weights otherwise (evaluation, a checkpoint) waits for all of them first (wait_all_gathered).
//    The values are the same bits whenever the gather completes: only its timing changes.
// --grad-reduce-dtype bf16 reduces the buckets in bf16 instead (half the bytes): each bucket's
// gradients are packed to bf16 bits in a wire buffer, summed there (float32 additions rounded to
// bf16), and unpacked into the float32 gradients (or update_grads' shard) when waited for. Weight
// gradients accumulate in float32 either way; float32 is the default, as Megatron's
// --accumulate-allreduce-grads-in-fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/device_array.h"
#include "framework/parameter.h"
#include "parallel/bucket_plan.h"
#include "parallel/communicator.h"
#include "parallel/layout.h"

namespace gpt {

// The state segments of dp rank `dp_rank` under the plan: its shard of every bucket.
std::vector<StateSegment> shard_segments(const BucketPlan& plan, int dp_rank);

// The plan's input from a store's registered parameters.
std::vector<BucketParameter> bucket_parameters(const ParameterStore& store);

class GradientBuckets {
 public:
  // `plan` is the one the store was allocated with (its padding); sharded when plan.shards > 1,
  // which must then equal dp's size and the store's state must be sharded by shard_segments. In
  // bf16 at dp > 1 the wires (the padded gradients' size, and the shard's when sharded) are
  // allocated here, as comm memory.
  GradientBuckets(ParameterStore& store, Communicator& dp, const BucketPlan& plan,
                  GradReduceDtype dtype = GradReduceDtype::kFp32);
  // Replicated optimizer, buckets of at least bucket_elements (an unpadded store).
  GradientBuckets(ParameterStore& store, Communicator& dp, int64_t bucket_elements);

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  bool sharded() const { return sharded_; }
  struct Bucket {
    BucketSpan span;
    size_t pending = 0;  // parameters not yet final this step
    std::unique_ptr<Request> request;
    std::unique_ptr<Request> gather;  // the updated values' all-gather, until waited
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

  void begin_step();
  // Parameters [first, end) (registration indices) hold their final gradient for the step: their
  // buckets' reductions are posted once complete, and those in flight driven on.
  void mark_ready(size_t first, size_t end);
  // Posts what is left and waits for every bucket's reduction (and any gather still in flight).
  void finish();
  // Sharded only, after the optimizer step: posts every bucket's all-gather of the updated
  // shards, the last bucket (the first layers' parameters) first.
  void post_gather();
  // The gathers of the buckets that hold parameters [first, end) complete; the others are driven
  // on (Request::progress). Nothing to wait for when none is in flight.
  void wait_gathered(size_t first, size_t end);
  void wait_all_gathered();
  bool gathering() const;  // some bucket's gather is in flight

 private:
  void post(Bucket& b);
  void complete(Bucket& b);   // waits for its reduction and, in bf16, unpacks the result
  void progress_in_flight();  // Request::progress on each reduction and gather in flight
  void wait_gather(Bucket& b);

  ParameterStore& store_;
  Communicator& dp_;
  bool sharded_ = false;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_param_;
  DeviceArray<uint16_t> wire_, shard_wire_;  // bf16 reduction: the gradients, this rank's shard
};

}  // namespace gpt
