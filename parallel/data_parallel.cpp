// Bucketed dp gradient reduction (see data_parallel.h).
#include "parallel/data_parallel.h"

#include "framework/check.h"

namespace gpt {

GradientBuckets::GradientBuckets(ParameterStore& store, Communicator& dp, int64_t bucket_elements)
    : store_(store), dp_(dp) {
  GPT_CHECK(bucket_elements >= 1, "a gradient bucket needs at least one element");
  const auto& params = store.params();
  bucket_of_param_.assign(params.size(), -1);
  // Walk the parameters backwards: the last registered are the first the backward finishes.
  size_t end = params.size();
  while (end > 0) {
    Bucket b;
    b.end_param = end;
    size_t first = end;
    int64_t numel = 0;
    while (first > 0 && numel < bucket_elements) numel += params[--first].numel();
    b.first_param = first;
    b.offset = params[first].offset;
    b.numel = params[end - 1].offset + params[end - 1].numel() - b.offset;
    for (size_t i = first; i < end; ++i) bucket_of_param_[i] = static_cast<int>(buckets_.size());
    buckets_.push_back(std::move(b));
    end = first;
  }
}

void GradientBuckets::begin_step() {
  for (Bucket& b : buckets_) {
    GPT_CHECK(b.request == nullptr, "a gradient bucket is still in flight from the last step");
    b.pending = b.end_param - b.first_param;
  }
}

void GradientBuckets::mark_ready(size_t first, size_t end) {
  for (size_t i = first; i < end; ++i) {
    Bucket& b = buckets_[static_cast<size_t>(bucket_of_param_[i])];
    GPT_CHECK(b.pending > 0, "parameter " << store_.params()[i].name << " marked ready twice");
    if (--b.pending == 0 && dp_.size() > 1)
      b.request = dp_.iall_reduce(store_.grads() + b.offset, b.numel, ReduceOp::kSum);
  }
}

void GradientBuckets::finish() {
  for (Bucket& b : buckets_) {
    if (b.pending > 0) {  // parameters the backward never marked (none on a full stage)
      b.pending = 0;
      if (dp_.size() > 1)
        b.request = dp_.iall_reduce(store_.grads() + b.offset, b.numel, ReduceOp::kSum);
    }
  }
  for (Bucket& b : buckets_) {
    if (b.request) b.request->wait();
    b.request.reset();
  }
}

}  // namespace gpt
