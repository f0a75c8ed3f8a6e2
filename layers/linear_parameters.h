// What ColumnParallelLinear and RowParallelLinear share: nn.Linear's two parameters (weight
// [OC, IC], bias [OC]), registered with the block of each that this rank holds. Weights are drawn
// N(0, init_std) and decayed, biases start at zero and are not (docs/DESIGN.md "Model"); each
// linear decides its own split.
#pragma once

#include <string>
#include <vector>

#include "framework/parameter.h"

namespace gpt {

// GPT-2's init of the linear weights: N(0, 0.02), and N(0, 0.02/sqrt(2*n_layer)) for the two
// residual output projections (attn.c_proj, mlp.c_proj) of each of the n_layer blocks.
inline constexpr float kLinearInitStd = 0.02f;
float residual_projection_init_std(int64_t n_layer);

struct LinearSpec {
  std::string name;      // registers "<name>.weight" and "<name>.bias"
  int64_t in_features;   // IC
  int64_t out_features;  // OC
  float init_std;
  bool bias = true;  // the Llama family's linears have none (Qwen2's q, k and v do)
  // Column-parallel: consecutive groups of this many tp ranks hold the same rows (Llama's k and
  // v when tp exceeds the kv heads); ParameterSpec::tp_replicas.
  int64_t tp_replicas = 1;
};

// This rank's block of the two parameters.
struct LinearShard {
  int64_t local_in;                     // columns of the local weight
  int64_t local_out;                    // rows of the local weight, elements of the local bias
  std::vector<Slab> weight_slabs = {};  // what of [OC, IC] they hold
  std::vector<Slab> bias_slabs = {};    // what of [OC]
  bool bias_replicated = false;         // every tp rank holds the same full bias
};

struct LinearParameters {
  Parameter* weight;  // (local_out, local_in)
  Parameter* bias;    // (local_out); null without one
  const float* bias_value() const { return bias ? bias->value : nullptr; }
  float* bias_grad() const { return bias ? bias->grad : nullptr; }
};

LinearParameters add_linear_parameters(ParameterStore& store, const LinearSpec& spec,
                                       LinearShard shard);

}  // namespace gpt
