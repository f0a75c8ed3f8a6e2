// TensorParallel: the tp all-reduces behind Megatron's region operators (see tensor_parallel.h).
#include "parallel/tensor_parallel.h"

#include "framework/check.h"
#include "framework/timer.h"

namespace gpt {

void TensorParallel::all_reduce(float* buf, int64_t n, ReduceOp op) {
  if (tp_.size() == 1) return;
  ScopedTimer timer(seconds_, &backend_);
  tp_.all_reduce(buf, n, op);
}

void TensorParallel::reduce_from_tp_region(float* buf, int64_t n) {
  all_reduce(buf, n, ReduceOp::kSum);
}

void TensorParallel::reduce_input_grad(float* dinp, float* partial, int64_t local_rows, int64_t C,
                                       const std::function<void()>& overlap) {
  if (tp_.size() == 1) {
    if (overlap) overlap();
    return;
  }
  std::unique_ptr<Request> request;
  {
    ScopedTimer timer(seconds_, &backend_);  // posting: on the host-staged path a device copy
    request = sequence_parallel_
                  ? tp_.ireduce_scatter(partial, dinp, local_rows * C, ReduceOp::kSum)
                  : tp_.iall_reduce(dinp, local_rows * C, ReduceOp::kSum);
  }
  if (overlap) {
    if (!progress_) progress_ = std::make_unique<BackgroundProgress>();
    progress_->overlap(*request, overlap);
  }
  ScopedTimer timer(seconds_, &backend_);
  request->wait();
}

void TensorParallel::gather_rows(float* full, const float* local, int64_t local_rows, int64_t C) {
  ScopedTimer timer(seconds_, &backend_);
  tp_.all_gather(local, full, local_rows * C);
}

void TensorParallel::reduce_scatter_rows(float* local, const float* full, int64_t local_rows,
                                         int64_t C) {
  ScopedTimer timer(seconds_, &backend_);
  tp_.reduce_scatter(full, local, local_rows * C, ReduceOp::kSum);
}

ShardRange shard_range(int64_t total, int rank, int size) {
  GPT_CHECK(total % size == 0, total << " items do not split evenly over " << size << " ranks");
  const int64_t per_rank = total / size;
  return {rank * per_rank, per_rank};
}

}  // namespace gpt
