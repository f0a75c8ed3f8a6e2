// Registration of a linear layer's weight and bias (see linear_parameters.h).
#include "layers/linear_parameters.h"

namespace gpt {

LinearParameters add_linear_parameters(ParameterStore& store, const LinearSpec& spec,
                                       LinearShard shard) {
  Parameter& weight = store.add({.name = spec.name + ".weight",
                                 .shape = {spec.out_features, spec.in_features},
                                 .local_numel = shard.local_out * shard.local_in,
                                 .slabs = std::move(shard.weight_slabs),
                                 .init = InitKind::kNormal,
                                 .init_std = spec.init_std,
                                 .weight_decay = true,
                                 .tp_replicas = spec.tp_replicas});
  if (!spec.bias) return {&weight, nullptr};
  Parameter& bias = store.add({.name = spec.name + ".bias",
                               .shape = {spec.out_features},
                               .local_numel = shard.local_out,
                               .slabs = std::move(shard.bias_slabs),
                               .init = InitKind::kZeros,
                               .tp_replicated = shard.bias_replicated,
                               .tp_replicas = spec.tp_replicas});
  return {&weight, &bias};
}

}  // namespace gpt
