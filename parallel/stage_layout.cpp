// The layer split over stages and chunks (see stage_layout.h).
#include "parallel/stage_layout.h"

#include "framework/families/model_family.h"

namespace gpt {

StageSpec virtual_stage_spec(const ModelConfig& cfg, int pp, int virtual_stages, int stage,
                             int chunk, const std::vector<int64_t>& pipeline_layers) {
  const int64_t parts = static_cast<int64_t>(pp) * virtual_stages;
  const int64_t vs = static_cast<int64_t>(chunk) * pp + stage;
  StageSpec spec;
  spec.first_layer = cfg.n_layer * vs / parts;
  spec.n_layers = cfg.n_layer * (vs + 1) / parts - spec.first_layer;
  if (!pipeline_layers.empty()) {
    spec.first_layer = 0;
    for (int64_t before = 0; before < vs; ++before)
      spec.first_layer += pipeline_layers[static_cast<size_t>(before)];
    spec.n_layers = pipeline_layers[static_cast<size_t>(vs)];
  }
  spec.has_embedding = vs == 0;
  spec.has_head = vs == parts - 1;
  spec.tied_copy = pp > 1 && spec.has_head && describe(cfg).tied_head;
  return spec;
}

}  // namespace gpt
