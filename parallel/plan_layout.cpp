// Names and small arithmetic of the planner's layouts (see plan_layout.h).
#include "parallel/plan_layout.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

const char* regime_name(PrecisionRegime p) {
  switch (p) {
    case PrecisionRegime::kFp32:
      return "fp32";
    case PrecisionRegime::kBf16:
      return "bf16";
    case PrecisionRegime::kMegatronMixed:
      return "megatron-mixed";
  }
  return "?";
}

const char* regime_description(PrecisionRegime p) {
  switch (p) {
    case PrecisionRegime::kFp32:
      return "this project's fp32: every tensor in fp32, matrix products at the TF32 peak";
    case PrecisionRegime::kBf16:
      return "this project's bf16: bf16 matrix-product operands; activations, gradients, master "
             "weights and AdamW state in fp32";
    case PrecisionRegime::kMegatronMixed:
      return "Megatron-LM's mixed precision (not a train regime): 16-bit weights, activations "
             "and gradients, fp32 main gradients, master weights and Adam state, dropout 0.1";
  }
  return "?";
}

int64_t PlanLayout::recomputed_layers_per_chunk(const ModelConfig& m) const {
  if (recompute != Recompute::kFull) return 0;
  const int64_t per_chunk = layers_per_chunk(m);
  return recompute_layers <= 0 ? per_chunk : std::min<int64_t>(recompute_layers, per_chunk);
}

std::string describe(const PlanLayout& l) {
  return GPT_MSG(
      "tp " << l.tp << " pp " << l.pp << " dp " << l.dp << " " << schedule_name(l.schedule)
            << (l.virtual_stages > 1 ? GPT_MSG(" v " << l.virtual_stages) : "") << " mb "
            << l.micro_batch << (l.sequence_parallel ? " sp" : "") << " recompute "
            << recompute_name(l.recompute) << (l.distributed_optimizer ? " dist-opt" : "") << " "
            << regime_name(l.precision));
}

}  // namespace gpt
