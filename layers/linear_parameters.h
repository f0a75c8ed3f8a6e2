// What ColumnParallelLinear and RowParallelLinear share: nn.Linear's two parameters (weight
// [OC, IC], bias [OC]) of a LinearSpec (the model family's), registered with the block of each
// that this rank holds (parallel/parameter_shards.h). Weights are drawn N(0, init_std) and
// decayed, biases start at zero and are not (docs/DESIGN.md "Model").
#pragma once

#include <string>
#include <vector>

#include "framework/families/model_family.h"
#include "framework/parameter.h"
#include "parallel/parameter_shards.h"

namespace gpt {

struct LinearParameters {
  Parameter* weight;  // (local_out, local_in)
  Parameter* bias;    // (local_out); null without one
  const float* bias_value() const { return bias ? bias->value : nullptr; }
  float* bias_grad() const { return bias ? bias->grad : nullptr; }
};

LinearParameters add_linear_parameters(ParameterStore& store, const LinearSpec& spec,
                                       LinearShard shard);

}  // namespace gpt
