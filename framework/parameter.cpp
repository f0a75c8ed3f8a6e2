// ParameterStore: registration, flat allocation, layout-independent initialisation.
#include "framework/parameter.h"

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

Parameter& ParameterStore::add(ParameterSpec spec) {
  GPT_CHECK(!allocated_, "parameter " << spec.name << " registered after allocation");
  Parameter p;
  static_cast<ParameterSpec&>(p) = std::move(spec);
  p.offset = total_;
  total_ += p.local_numel;
  params_.push_back(std::move(p));
  return params_.back();
}

void ParameterStore::allocate() {
  GPT_CHECK(!allocated_, "parameters allocated twice");
  values_ = DeviceArray<float>(backend_, total_, MemoryCategory::kWeights);
  grads_ = DeviceArray<float>(backend_, total_, MemoryCategory::kGrads);
  for (Parameter& p : params_) {
    p.value = values_.data() + p.offset;
    p.grad = grads_.data() + p.offset;
  }
  allocated_ = true;
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
}

float* ParameterStore::add_state(const std::string& state_name) {
  GPT_CHECK(allocated_, "optimizer state before parameter allocation");
  for (const std::string& n : state_names_)
    GPT_CHECK(n != state_name, "state " << n << " added twice");
  state_names_.push_back(state_name);
  states_.emplace_back(backend_, total_, MemoryCategory::kOptimizer);
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
