// Tensor parallelism's communication (Megatron-LM, Shoeybi et al. 2019), drawn as its conjugate
// region operators: reduce_from_tp_region all-reduces in the forward (row-parallel outputs, the
// vocabulary-parallel embedding) and is the identity backward; copy_to_tp_region is the identity
// forward and all-reduces the input gradient backward (column-parallel inputs, the head: its
// backward is reduce_input_grad, which hides the reduction behind the weight gradient). Layers
// call only these. At tp = 1 they do nothing. Time and bytes spent are counted for the step log:
// the time is what the caller waited, so communication hidden behind compute is not counted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "framework/backend.h"
#include "framework/device_array.h"
#include "parallel/background_progress.h"
#include "parallel/communicator.h"

namespace gpt {

class TensorParallel {
 public:
  // sequence_parallel (Korthikanti et al. 2022) takes effect only at tp > 1.
  TensorParallel(Communicator& tp, Backend& backend, bool sequence_parallel = false)
      : tp_(tp), backend_(backend), sequence_parallel_(sequence_parallel && tp.size() > 1) {}
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }
  Communicator& comm() { return tp_; }

  // With sequence parallelism the LayerNorm and residual regions hold a contiguous block of
  // N/tp of the N = B*T token rows on each rank; the all-reduces around the tp regions become
  // an all-gather of rows on the way in and a reduce-scatter of rows on the way out.
  bool sequence_parallel() const { return sequence_parallel_; }
  int64_t local_rows(int64_t N) const { return sequence_parallel_ ? N / size() : N; }
  // full (N, C) = the row blocks (N/tp, C) of every rank, in rank order.
  void gather_rows(float* full, const float* local, int64_t local_rows, int64_t C);
  // local (N/tp, C) = this rank's row block of the sum over ranks of full (N, C).
  void reduce_scatter_rows(float* local, const float* full, int64_t local_rows, int64_t C);

  // bf16 precision's 16-bit messages (Megatron's regime): from this call on, the activations and
  // activation gradients below travel as bf16, half the bytes, through wires of up to `full`
  // values (and, with sequence parallelism, a reduce-scatter's result of `local`) reserved here as
  // comm memory. Gathers then lose nothing (what they move is stored in bf16, or feeds only bf16
  // products); sums round each rank's partial to bf16 and add in float32, rounding again. The
  // cross-entropy's statistics (all_reduce) and generation's rows stay float32.
  void use_bf16_messages(int64_t full, int64_t local);
  bool bf16_messages() const { return wire_full_.size() > 0; }

  // Forward of a row-parallel output or the embedding: buf (n) = sum over tp ranks.
  void reduce_from_tp_region(float* buf, int64_t n);
  // The same for generation's token rows, in float32.
  void reduce_decode_rows(float* buf, int64_t n);
  // Backward of a column-parallel input (copy_to_tp_region's): a column-parallel linear's input
  // gradient, reduced non-blocking while `overlap` (its weight gradient, or nothing) computes, the
  // request progressed meanwhile (background_progress.h): dinp (Nl, C) = this rank's rows of the
  // sum over ranks of partial (N, C) with sequence parallelism (a reduce-scatter), else the sum in
  // place (partial == dinp, an all-reduce). Both forms take the same non-blocking collective, so
  // overlapping changes no bit.
  void reduce_input_grad(float* dinp, float* partial, int64_t local_rows, int64_t C,
                         const std::function<void()>& overlap);
  // Whether column-parallel linears overlap that reduction with their weight gradient
  // (--no-overlap-tp-comm turns it off; the bits are the same either way).
  bool overlaps_comm() const { return overlap_comm_ && tp_.size() > 1; }
  void set_overlap_comm(bool on) { overlap_comm_ = on; }
  // The cross-entropy's row statistics: max or sum over the vocabulary shards.
  void all_reduce(float* buf, int64_t n, ReduceOp op);

  double seconds() const { return seconds_; }
  void reset_seconds() { seconds_ = 0.0; }

 private:
  Communicator& tp_;
  Backend& backend_;
  bool sequence_parallel_;
  bool overlap_comm_ = true;
  double seconds_ = 0.0;
  std::unique_ptr<BackgroundProgress> progress_;  // made on the first overlap
  DeviceArray<uint16_t> wire_full_, wire_local_;  // bf16 messages (use_bf16_messages)
  uint16_t* pack(DeviceArray<uint16_t>& wire, const float* values, int64_t n);
};

// The contiguous block [start, start + count) of `total` items that tp rank `rank` of `size` owns;
// `total` must divide evenly.
struct ShardRange {
  int64_t start;
  int64_t count;
};
ShardRange shard_range(int64_t total, int rank, int size);

}  // namespace gpt
