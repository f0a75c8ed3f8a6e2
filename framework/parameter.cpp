// ParameterStore: registration, flat allocation, layout-independent initialisation.
#include "framework/parameter.h"

#include <algorithm>

#include "framework/check.h"
#include "framework/rng.h"

namespace gpt {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Slab::numel() const {
  return shape_numel(count);
}

std::vector<int64_t> slab_logical_indices(const Slab& slab, const std::vector<int64_t>& shape) {
  GPT_CHECK(slab.start.size() == shape.size() && slab.count.size() == shape.size(),
            "slab rank does not match the tensor's");
  const size_t rank = shape.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(slab.numel()));
  if (slab.numel() == 0) return out;
  std::vector<int64_t> pos(rank, 0);  // odometer over the slab
  while (true) {
    int64_t idx = 0;
    for (size_t d = 0; d < rank; ++d) idx += (slab.start[d] + pos[d]) * strides[d];
    out.push_back(idx);
    size_t d = rank;
    while (d-- > 0) {
      if (++pos[d] < slab.count[d]) break;
      pos[d] = 0;
      if (d == 0) return out;
    }
    if (rank == 0) return out;
  }
}

namespace {

// Elements [lo, hi) (row-major positions inside the slab) of a slab as rectangular blocks,
// appended in order; local_offset = the slab's local_offset + the block's first position.
void split_slab(const Slab& slab, int64_t lo, int64_t hi, std::vector<Slab>& out) {
  if (lo >= hi) return;
  const size_t rank = slab.count.size();
  if (rank <= 1) {
    Slab piece = slab;
    if (rank == 1) {
      piece.start[0] += lo;
      piece.count[0] = hi - lo;
    }
    piece.local_offset = slab.local_offset + lo;
    out.push_back(std::move(piece));
    return;
  }
  const int64_t inner = slab.numel() / slab.count[0];  // elements per leading index
  if (inner == 0) return;
  // The leading index `row` alone, its elements [a, b): recurse into the remaining dimensions.
  auto partial_row = [&](int64_t row, int64_t a, int64_t b) {
    Slab rest{{slab.start.begin() + 1, slab.start.end()},
              {slab.count.begin() + 1, slab.count.end()},
              slab.local_offset + row * inner};
    std::vector<Slab> parts;
    split_slab(rest, a, b, parts);
    for (Slab& part : parts) {
      part.start.insert(part.start.begin(), slab.start[0] + row);
      part.count.insert(part.count.begin(), 1);
      out.push_back(std::move(part));
    }
  };
  int64_t first = lo / inner, last = hi / inner;  // whole rows [first, last) after the head
  if (lo % inner != 0) {
    if (first == (hi - 1) / inner) return partial_row(first, lo % inner, hi - first * inner);
    partial_row(first, lo % inner, inner);
    ++first;
  }
  if (first < last) {
    Slab rows = slab;
    rows.start[0] += first;
    rows.count[0] = last - first;
    rows.local_offset = slab.local_offset + first * inner;
    out.push_back(std::move(rows));
  }
  if (hi % inner != 0) partial_row(last, 0, hi % inner);
}

}  // namespace

std::vector<Slab> storage_range_slabs(const Parameter& p, int64_t begin, int64_t end) {
  std::vector<Slab> out;
  for (const Slab& slab : p.slabs) {
    const int64_t lo = std::max(begin, slab.local_offset);
    const int64_t hi = std::min(end, slab.local_offset + slab.numel());
    split_slab(slab, lo - slab.local_offset, hi - slab.local_offset, out);
  }
  return out;
}

Parameter& ParameterStore::add(ParameterSpec spec) {
  GPT_CHECK(!allocated_, "parameter " << spec.name << " registered after allocation");
  Parameter p;
  static_cast<ParameterSpec&>(p) = std::move(spec);
  p.offset = total_;
  total_ += p.local_numel;
  params_.push_back(std::move(p));
  return params_.back();
}

void ParameterStore::allocate(const std::vector<int64_t>& padding_after) {
  GPT_CHECK(!allocated_, "parameters allocated twice");
  GPT_CHECK(padding_after.empty() || padding_after.size() == params_.size(),
            padding_after.size() << " paddings for " << params_.size() << " parameters");
  total_ = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].offset = total_;
    total_ += params_[i].local_numel + (padding_after.empty() ? 0 : padding_after[i]);
  }
  segments_ = {{0, total_, 0}};
  values_ = DeviceArray<float>(backend_, total_, MemoryCategory::kWeights);
  grads_ = DeviceArray<float>(backend_, total_, MemoryCategory::kGrads);
  if (backend_.precision() == Precision::kBf16)
    compute_ = DeviceArray<uint16_t>(backend_, total_, MemoryCategory::kWeights);
  for (Parameter& p : params_) {
    p.value = values_.data() + p.offset;
    p.grad = grads_.data() + p.offset;
    if (compute_.data() != nullptr) p.compute = compute_.data() + p.offset;
  }
  compute_fresh_.assign(params_.size(), 0);
  allocated_ = true;
}

void ParameterStore::mark_values_changed() {
  std::fill(compute_fresh_.begin(), compute_fresh_.end(), 0);
}

void ParameterStore::refresh_compute_copies(size_t first, size_t end) {
  if (compute_.data() == nullptr) return;
  GPT_CHECK(first <= end && end <= params_.size(), "parameter range out of bounds");
  // Consecutive stale parameters are one pack, over the padding between them too (zeros).
  for (size_t i = first; i < end;) {
    if (compute_fresh_[i] != 0) {
      ++i;
      continue;
    }
    size_t last = i;
    while (last + 1 < end && compute_fresh_[last + 1] == 0) ++last;
    const int64_t begin = params_[i].offset;
    const int64_t stop = params_[last].offset + params_[last].local_numel;
    backend_.pack_bf16(compute_.data() + begin, values_.data() + begin, stop - begin);
    std::fill(compute_fresh_.begin() + static_cast<std::ptrdiff_t>(i),
              compute_fresh_.begin() + static_cast<std::ptrdiff_t>(last + 1), 1);
    i = last + 1;
  }
}

void ParameterStore::initialize(uint64_t seed) {
  for (Parameter& p : params_) {
    const CounterRng rng(seed, p.name);
    set_values(p, [&](int64_t logical) {
      if (p.init == InitKind::kNormal)
        return p.init_std * rng.normal(static_cast<uint64_t>(logical));
      return p.init == InitKind::kOnes ? 1.0f : 0.0f;
    });
  }
}

void ParameterStore::set_values(Parameter& p, const std::function<float(int64_t)>& value_at) {
  GPT_CHECK(allocated_, "parameter values set before allocate");
  std::vector<float> host(static_cast<size_t>(p.local_numel), 0.0f);
  for (const Slab& slab : p.slabs) {
    const std::vector<int64_t> logical = slab_logical_indices(slab, p.shape);
    for (size_t i = 0; i < logical.size(); ++i)
      host[static_cast<size_t>(slab.local_offset) + i] = value_at(logical[i]);
  }
  if (!host.empty()) backend_.copy_from_host(p.value, host.data(), host.size() * sizeof(float));
  mark_values_changed();
}

void ParameterStore::shard_optimizer_state(std::vector<StateSegment> segments) {
  GPT_CHECK(allocated_ && state_names_.empty(),
            "optimizer state sharded before allocation or after a state was added");
  int64_t end = 0, state_end = 0;
  for (const StateSegment& s : segments) {
    GPT_CHECK(s.offset >= end && s.numel >= 0 && s.offset + s.numel <= total_ &&
                  s.state_offset == state_end,
              "state segments must be disjoint, in memory order, inside the buffers and packed");
    end = s.offset + s.numel;
    state_end += s.numel;
  }
  segments_ = std::move(segments);
  sharded_ = true;
  update_grads_ = DeviceArray<float>(backend_, state_end, MemoryCategory::kComm);
}

int64_t ParameterStore::state_numel() const {
  return segments_.empty() ? 0 : segments_.back().state_offset + segments_.back().numel;
}

std::vector<StatePiece> ParameterStore::state_pieces(const Parameter& p) const {
  std::vector<StatePiece> pieces;
  for (const StateSegment& s : segments_) {
    const int64_t begin = std::max(s.offset, p.offset);
    const int64_t end = std::min(s.offset + s.numel, p.offset + p.local_numel);
    if (begin < end)
      pieces.push_back({begin - p.offset, end - begin, s.state_offset + begin - s.offset});
  }
  return pieces;
}

std::vector<Slab> ParameterStore::state_slabs(const Parameter& p) const {
  std::vector<Slab> out;
  for (const StatePiece& piece : state_pieces(p)) {
    for (Slab& slab : storage_range_slabs(p, piece.begin, piece.begin + piece.numel)) {
      slab.local_offset += piece.state_offset - piece.begin;
      out.push_back(std::move(slab));
    }
  }
  return out;
}

float* ParameterStore::add_state(const std::string& state_name) {
  GPT_CHECK(allocated_, "optimizer state before parameter allocation");
  for (const std::string& n : state_names_)
    GPT_CHECK(n != state_name, "state " << n << " added twice");
  state_names_.push_back(state_name);
  states_.emplace_back(backend_, state_numel(), MemoryCategory::kOptimizer);
  return states_.back().data();
}

float* ParameterStore::state(const std::string& state_name) {
  for (size_t i = 0; i < state_names_.size(); ++i)
    if (state_names_[i] == state_name) return states_[i].data();
  fail("state_name", __FILE__, __LINE__, "no optimizer state named " + state_name);
}

Parameter* ParameterStore::find(const std::string& name) {
  for (Parameter& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

void ParameterStore::zero_grads() {
  backend_.fill_zero(grads_.data(), total_);
}

}  // namespace gpt
