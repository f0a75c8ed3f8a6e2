// The dp gradient buckets of one rank as a pure function of its parameter sizes (registration
// order), shared by the runtime (which pads the flat buffers), the gradient reduction, and the
// memory model. Walking the parameters backwards (the order the backward finishes them),
// consecutive parameters form buckets of at least `bucket_elements`. With the distributed
// optimizer (ZeRO-1) at dp > 1 each bucket is padded after its last parameter to a multiple of
// dp, so that it splits into dp equal shards (one reduce-scatter and one all-gather per bucket),
// and `wte` gets a bucket of its own: with pp > 1 the first and the last stage each hold it, and
// the embedding group sums dp rank r's shard of the two copies, which must then cover the same
// elements on both stages whatever else each stage holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

// One parameter as the plan sees it: its checkpoint name and the elements this rank stores.
struct BucketParameter {
  std::string name;
  int64_t numel = 0;
  bool own_bucket = false;    // ParameterSpec::own_bucket: the token embedding
  bool weight_decay = false;  // ParameterSpec::weight_decay: the matrices
};

struct BucketSpan {
  size_t first_param = 0;  // registration indices [first_param, end_param)
  size_t end_param = 0;
  int64_t offset = 0;        // in the padded flat buffers
  int64_t numel = 0;         // of its parameters and the padding between them (none)
  int64_t padded_numel = 0;  // numel rounded up to a multiple of the shards
  int64_t shard_numel = 0;   // padded_numel / shards: each rank's share
  int64_t shard_offset = 0;  // where a rank's share sits in its shard buffers (memory order)
};

struct BucketPlan {
  int shards = 1;                      // per bucket: dp with ZeRO-1, else 1
  std::vector<BucketSpan> buckets;     // in posting order: the last parameters' bucket first
  std::vector<int64_t> padding_after;  // zero elements after each parameter (registration order)
  int64_t padded_total = 0;            // elements of the padded flat buffers
  int64_t shard_total = 0;  // elements of one rank's shard buffers (padded_total / shards)
};

// The default bucket: 2^20 elements, 4 MiB of fp32 gradients per dp collective (train's
// --dp-bucket-size, the memory model's and the planner's alike).
constexpr int64_t kDefaultBucketElements = int64_t{1} << 20;

// The buckets of parameters `params` with at least `bucket_elements` each (>= 1). With
// distributed_optimizer and dp > 1: padded to multiples of dp, wte alone in its bucket.
BucketPlan plan_buckets(const std::vector<BucketParameter>& params, int64_t bucket_elements, int dp,
                        bool distributed_optimizer);

// The optimizer-state floats one rank keeps per state buffer under the distributed optimizer:
// sum over its buckets of ceil(numel / dp) = (its parameters' elements + padding) / dp, where
// each bucket's padding is (dp - numel % dp) % dp. AdamW keeps two such buffers (exp_avg,
// exp_avg_sq), SGD one (momentum_buffer); the reduced gradient shard is one more (comm).
// At dp 1 (a no-op) the full count. The memory model's prediction of optimizer bytes.
int64_t distributed_optimizer_shard_floats(const std::vector<BucketParameter>& params,
                                           int64_t bucket_elements, int dp);

// The padding the distributed optimizer adds to each of the value and gradient buffers.
int64_t distributed_optimizer_padding_floats(const std::vector<BucketParameter>& params,
                                             int64_t bucket_elements, int dp);

}  // namespace gpt
