// The planner's memory adapter: one function from a layout to the bytes of its heaviest rank, in
// the memory model's categories (docs/DESIGN.md "Memory": weights grads optimizer activations comm
// workspace). This project's regimes call the memory model (parallel/memory_model.h) for the CUDA
// backend; the megatron-mixed regime is priced with Korthikanti et al. 2022's per-block activation
// formulas (their section 4) and Megatron's 18 bytes per parameter.
#pragma once

#include <cstdint>

#include "framework/config.h"
#include "framework/memory_ledger.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

struct PlannedMemory {
  MemoryBytes bytes;  // per category, as the memory model and train's ledger count them
  int64_t total() const { return bytes.total(); }
};

// Parameters pipeline stage `stage` holds on one tp rank: the memory model's count
// (chunk_parameter_floats) summed over the stage's model chunks: its blocks' shards, plus the
// embedding (wte, wpe) on the first stage and wte's tied copy and ln_f on the last.
int64_t stage_parameters(const ModelConfig& model, const PlanLayout& layout, int stage);

// The memory of one rank of `stage`, with `schedule` (the layout's) giving the caches it holds;
// plan_memory is the largest total over the stages. `device`: the backend this project's
// regimes run on (the CPU for a calibrated CPU cluster, where it equals train's ledger).
PlannedMemory stage_memory(const ModelConfig& model, const PlanLayout& layout,
                           const Schedule& schedule, int stage,
                           DeviceKind device = DeviceKind::kCuda);
PlannedMemory plan_memory(const ModelConfig& model, const PlanLayout& layout,
                          const Schedule& schedule, DeviceKind device = DeviceKind::kCuda);

}  // namespace gpt
