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

void TensorParallel::use_bf16_messages(int64_t full, int64_t local) {
  if (tp_.size() == 1) return;
  wire_full_ = DeviceArray<uint16_t>(backend_, full, MemoryCategory::kComm);
  if (sequence_parallel_)
    wire_local_ = DeviceArray<uint16_t>(backend_, local, MemoryCategory::kComm);
}

uint16_t* TensorParallel::pack(DeviceArray<uint16_t>& wire, const float* values, int64_t n) {
  GPT_CHECK(n <= wire.size(),
            "a tp message of " << n << " values exceeds its bf16 wire of " << wire.size());
  if (values) backend_.pack_bf16(wire.data(), values, n);
  return wire.data();
}

void TensorParallel::reduce_from_tp_region(float* buf, int64_t n) {
  if (!bf16_messages()) return all_reduce(buf, n, ReduceOp::kSum);
  ScopedTimer timer(seconds_, &backend_);
  uint16_t* wire = pack(wire_full_, buf, n);
  tp_.iall_reduce_bf16(wire, n)->wait();
  backend_.unpack_bf16(buf, wire, n);
}

void TensorParallel::reduce_decode_rows(float* buf, int64_t n) {
  all_reduce(buf, n, ReduceOp::kSum);
}

void TensorParallel::reduce_input_grad(float* dinp, float* partial, int64_t local_rows, int64_t C,
                                       const std::function<void()>& overlap) {
  if (tp_.size() == 1) {
    if (overlap) overlap();
    return;
  }
  std::unique_ptr<Request> request;
  const int64_t n = local_rows * C, full = sequence_parallel_ ? n * size() : n;
  {
    ScopedTimer timer(seconds_, &backend_);  // posting: on the host-staged path a device copy
    if (bf16_messages()) {
      uint16_t* wire = pack(wire_full_, partial, full);
      request = sequence_parallel_
                    ? tp_.ireduce_scatter_bf16(wire, pack(wire_local_, nullptr, n), n)
                    : tp_.iall_reduce_bf16(wire, n);
    } else {
      request = sequence_parallel_ ? tp_.ireduce_scatter(partial, dinp, n, ReduceOp::kSum)
                                   : tp_.iall_reduce(dinp, n, ReduceOp::kSum);
    }
  }
  if (overlap) {
    if (!progress_) progress_ = std::make_unique<BackgroundProgress>();
    progress_->overlap(*request, overlap);
  }
  ScopedTimer timer(seconds_, &backend_);
  request->wait();
  if (bf16_messages())
    backend_.unpack_bf16(dinp, sequence_parallel_ ? wire_local_.data() : wire_full_.data(), n);
}

void TensorParallel::gather_rows(float* full, const float* local, int64_t local_rows, int64_t C) {
  ScopedTimer timer(seconds_, &backend_);
  const int64_t n = local_rows * C;
  if (!bf16_messages()) return tp_.all_gather(local, full, n);
  // In place: this rank's block packed where the gather leaves it.
  uint16_t* wire = pack(wire_full_, nullptr, n * size());
  backend_.pack_bf16(wire + rank() * n, local, n);
  tp_.iall_gather_bf16(wire + rank() * n, wire, n)->wait();
  backend_.unpack_bf16(full, wire, n * size());
}

void TensorParallel::reduce_scatter_rows(float* local, const float* full, int64_t local_rows,
                                         int64_t C) {
  ScopedTimer timer(seconds_, &backend_);
  const int64_t n = local_rows * C;
  if (!bf16_messages()) return tp_.reduce_scatter(full, local, n, ReduceOp::kSum);
  uint16_t* wire = pack(wire_full_, full, n * size());
  tp_.ireduce_scatter_bf16(wire, pack(wire_local_, nullptr, n), n)->wait();
  backend_.unpack_bf16(local, wire_local_.data(), n);
}

ShardRange shard_range(int64_t total, int rank, int size) {
  GPT_CHECK(total % size == 0, total << " items do not split evenly over " << size << " ranks");
  const int64_t per_rank = total / size;
  return {rank * per_rank, per_rank};
}

}  // namespace gpt
