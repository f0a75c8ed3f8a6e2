// Parameters and the flat buffers they live in (docs/DESIGN.md "Parameters, buffers, caches").
// A Parameter knows its checkpoint name, its full logical shape and which block of that logical
// tensor this rank holds (one or more row-major slabs: c_attn's q, k and v rows are three). All
// parameters of a rank are carved, in registration order, from one value buffer, one gradient
// buffer and one buffer per optimizer state, so optimizers, clipping and dp reduction run over
// contiguous memory and checkpoints need no layer code. Under the distributed optimizer (ZeRO-1)
// the flat buffers carry padding between parameters, and this rank keeps optimizer state for a
// few segments of them only (StateSegment). Under bf16 precision the values keep a 16-bit compute
// copy (refresh_compute_copies).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "framework/backend.h"
#include "framework/device_array.h"

namespace gpt {

// A rectangular block of the logical tensor: logical [start, start + count) in every dimension,
// stored contiguously (row-major) from element local_offset of the parameter's local storage.
struct Slab {
  std::vector<int64_t> start;
  std::vector<int64_t> count;
  int64_t local_offset = 0;
  int64_t numel() const;
};

enum class InitKind { kNormal, kZeros, kOnes };

struct ParameterSpec {
  std::string name;            // checkpoint name, e.g. "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;  // full logical shape, nn.Linear layout (out, in)
  int64_t local_numel = 0;     // storage on this rank (may exceed the slabs: vocab padding)
  std::vector<Slab> slabs;     // what of the logical tensor this rank holds
  InitKind init = InitKind::kZeros;
  float init_std = 0.0f;       // for kNormal
  bool weight_decay = false;   // two or more dimensions
  bool tp_replicated = false;  // every tp rank holds the same full copy (LayerNorms, wpe)
  // Consecutive groups of this many tp ranks hold the same slab (the Llama family's key/value
  // heads when tp exceeds them); each rank's gradient is partial, summed over its group after
  // the step's backward.
  int64_t tp_replicas = 1;
  bool tied_copy = false;  // the last stage's wte when pp > 1: never counted or saved
  // A distributed optimizer gives it a bucket of its own: the token embedding, whose gradient
  // the tied head's copy on the last stage shares (parallel/bucket_plan.h).
  bool own_bucket = false;
  // Sequence parallel: the gradient covers this rank's rows only; summed over tp after the
  // step's backward.
  bool tp_partial_grad = false;
};

struct Parameter : ParameterSpec {
  int64_t offset = 0;  // element offset in the flat buffers
  float* value = nullptr;
  float* grad = nullptr;
  // Under bf16 precision: the values' 16-bit compute copy, what the products read (null in
  // float32). Current only after ParameterStore::refresh_compute_copies for this parameter.
  const uint16_t* compute = nullptr;
  WeightOperand operand() const { return {value, compute}; }
  int64_t numel() const { return local_numel; }
  // This rank holds the copy that counts once (gradient norm) over tp and pp.
  bool counts_once_over_tp_pp(int tp_rank) const {
    return !tied_copy && (tp_replicated ? tp_rank == 0 : tp_rank % tp_replicas == 0);
  }
};

// Elements [offset, offset + numel) of the flat buffers whose optimizer state this rank keeps,
// at [state_offset, state_offset + numel) of every state buffer and of update_grads(). Without
// sharding one segment covers the whole buffer.
struct StateSegment {
  int64_t offset = 0;
  int64_t numel = 0;
  int64_t state_offset = 0;
};

// A parameter's share of the state segments: elements [begin, begin + numel) of its storage,
// at state_offset of the state buffers.
struct StatePiece {
  int64_t begin = 0;
  int64_t numel = 0;
  int64_t state_offset = 0;
};

// The registry and flat buffers of one rank's parameters. Register everything, then allocate();
// parameters never move afterwards (held in a deque), so layers keep Parameter pointers.
class ParameterStore {
 public:
  explicit ParameterStore(Backend& backend) : backend_(backend) {}
  Parameter& add(ParameterSpec spec);  // before allocate()
  // Value and gradient buffers, values zero. padding_after[i] (empty: none) zero elements follow
  // parameter i, never touched by a layer: how dp buckets become multiples of dp (bucket_plan.h).
  void allocate(const std::vector<int64_t>& padding_after = {});

  // Fills every value from the counter RNG keyed by (seed, name, logical element index): the
  // same logical tensor whatever the layout. Storage outside the slabs (padding) stays zero.
  void initialize(uint64_t seed);
  // Sets p's values from value_at(logical element index), for the elements its slabs hold;
  // storage outside the slabs (padding) is zero. How weights from elsewhere enter (convert).
  void set_values(Parameter& p, const std::function<float(int64_t)>& value_at);

  // Under bf16 precision (Megatron's mixed precision): the values are the float32 master
  // weights, and a 16-bit copy of them in one more flat buffer is what the products read, made
  // once per update instead of in every product. Whoever changes values marks the copies stale
  // (set_values does; the pipeline does at the start of every run, ModelChunk::begin), and each
  // layer's forward refreshes the stale copies of its parameters [first, end) (registration
  // indices) just before it reads them, after their ZeRO-1 gather. No-ops in float32.
  void mark_values_changed();
  void refresh_compute_copies(size_t first, size_t end);

  // ZeRO-1, after allocate() and before add_state: this rank keeps optimizer state, and updates
  // values, for `segments` only (disjoint, in memory order); each state buffer holds them back to
  // back, and so does update_grads(), a separate buffer for their reduced gradients.
  void shard_optimizer_state(std::vector<StateSegment> segments);
  bool optimizer_state_sharded() const { return sharded_; }
  const std::vector<StateSegment>& state_segments() const { return segments_; }
  int64_t state_numel() const;  // elements of each state buffer
  // p's share of the state segments, in storage order (empty: none of it is kept here).
  std::vector<StatePiece> state_pieces(const Parameter& p) const;
  // The same as blocks of p's logical tensor (storage_range_slabs), each slab's local_offset an
  // offset into the state buffers: what a checkpoint writes and reads of p's optimizer state.
  std::vector<Slab> state_slabs(const Parameter& p) const;
  // The gradients the optimizer, the clipping and the tied-wte sum read, indexed like a state
  // buffer: grads() itself unless sharded.
  float* update_grads() { return sharded_ ? update_grads_.data() : grads_.data(); }

  // An extra buffer of state_numel() elements in the segments' layout, e.g. "exp_avg"; zero-filled.
  float* add_state(const std::string& state_name);
  float* state(const std::string& state_name);  // throws if absent
  const std::vector<std::string>& state_names() const { return state_names_; }

  std::deque<Parameter>& params() { return params_; }
  const std::deque<Parameter>& params() const { return params_; }
  Parameter* find(const std::string& name);
  int64_t total_numel() const { return total_; }  // with the padding
  float* values() { return values_.data(); }
  float* grads() { return grads_.data(); }
  void zero_grads();
  Backend& backend() { return backend_; }

 private:
  Backend& backend_;
  std::deque<Parameter> params_;
  int64_t total_ = 0;
  bool allocated_ = false;
  DeviceArray<float> values_, grads_;
  DeviceArray<uint16_t> compute_;    // bf16 precision: the compute copies (total_)
  std::vector<char> compute_fresh_;  // per parameter: its copy holds its current values
  bool sharded_ = false;
  std::vector<StateSegment> segments_;
  DeviceArray<float> update_grads_;  // sharded only: (state_numel)
  std::vector<std::string> state_names_;
  std::deque<DeviceArray<float>> states_;
};

// Logical element index (row-major over the full shape) of each local element of a slab, in
// storage order: the bridge between local storage, the RNG and checkpoint hyperslabs.
std::vector<int64_t> slab_logical_indices(const Slab& slab, const std::vector<int64_t>& shape);

// The blocks of the logical tensor that elements [begin, end) of p's storage hold, in storage
// order: rectangular slabs (a partial first row, whole rows, a partial last row, recursively),
// each with local_offset = the storage offset of its first element. Storage outside p's slabs
// (padding) is skipped. How a shard of the flat buffers maps onto checkpoint hyperslabs.
std::vector<Slab> storage_range_slabs(const Parameter& p, int64_t begin, int64_t end);

// The number of elements of a tensor of this shape (1 for a scalar's empty shape).
int64_t shape_numel(const std::vector<int64_t>& shape);

}  // namespace gpt
