// Which layers each pipeline stage (and each model chunk of an interleaved stage) holds: the
// split the runtime builds and the memory model and planner count by. Pure: no model code here.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/config.h"

namespace gpt {

struct StageSpec {
  int64_t first_layer = 0;
  int64_t n_layers = 0;
  bool has_embedding = true;  // first stage
  bool has_head = true;       // last stage
  bool tied_copy = false;     // pp > 1 and last stage: holds a copy of wte
};

// Balanced split of the layers over the pp * v virtual stages: virtual stage vs = chunk * pp +
// stage holds layers [vs*L/(pp v), (vs+1)*L/(pp v)); the embedding is on virtual stage 0, the
// head on the last, which holds a tied copy of wte when it is on another rank.
// `pipeline_layers` (pp * v counts in virtual-stage order), when not empty, overrides the even
// split.
StageSpec virtual_stage_spec(const ModelConfig& cfg, int pp, int virtual_stages, int stage,
                             int chunk, const std::vector<int64_t>& pipeline_layers = {});

// The fewest blocks virtual stage `vs` of `parts` may hold: 0 for the first (the embedding's) and
// the last (the head's), which have work without blocks; 1 for any other.
inline int64_t fewest_chunk_layers(int64_t vs, int64_t parts) {
  return vs == 0 || vs + 1 == parts ? 0 : 1;
}

}  // namespace gpt
