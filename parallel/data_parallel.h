// Data-parallel gradient reduction in buckets of the flat gradient buffer (PyTorch DDP /
// Megatron style): parameters are grouped, in reverse registration order (the order the
// backward finishes them), into contiguous buckets of at least `bucket_elements`; during the
// step's last backward each bucket's all-reduce (sum over dp) is posted as soon as every
// parameter in it is final, so a backend with asynchronous communication overlaps it with the
// rest of the backward. finish() waits for all of them. Gradients arrive pre-scaled by 1/dp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/parameter.h"
#include "parallel/communicator.h"

namespace gpt {

class GradientBuckets {
 public:
  GradientBuckets(ParameterStore& store, Communicator& dp, int64_t bucket_elements);

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // [first, last] element ranges, for tests and logs.
  struct Bucket {
    int64_t offset = 0;  // in the flat gradient buffer
    int64_t numel = 0;
    size_t first_param = 0;  // parameter indices [first_param, end_param)
    size_t end_param = 0;
    size_t pending = 0;  // parameters not yet final this step
    std::unique_ptr<Request> request;
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

  void begin_step();
  // Parameters [first, end) (registration indices) hold their final gradient for the step.
  void mark_ready(size_t first, size_t end);
  // Posts what is left and waits for every bucket's reduction.
  void finish();

 private:
  ParameterStore& store_;
  Communicator& dp_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_param_;
};

}  // namespace gpt
