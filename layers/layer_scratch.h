// Scratch shared by every layer of a stage: buffers read only inside the call that wrote them, so
// one copy serves all blocks, the embedding and the head, and every microbatch. The stage owns it
// and hands it to each layer at construction; nothing in it outlives a call, so caches and
// gradient sets never point into it.
#pragma once

#include "framework/config.h"
#include "framework/device_array.h"
#include "parallel/layer_sizes.h"

namespace gpt {

struct LayerScratch {
  DeviceArray<float> d_atty;    // (N,C/tp) attention output gradient
  DeviceArray<float> d_att;     // the backend's attention scratch (attention_scratch_floats)
  DeviceArray<float> d_fc_act;  // (N,4C/tp) GELU output gradient
  DeviceArray<float> partial;   // (N,C) partial sums before a reduce-scatter; sequence parallel
  DeviceArray<float> ln_local;  // (Nl,C) a LayerNorm's rows before their all-gather; likewise
  // Recomputation: the attention cache selective recomputation rebuilds in each backward, and
  // the output of a block's re-run forward (full), which its backward never reads.
  DeviceArray<float> att_rebuilt;
  DeviceArray<float> recomputed_out;  // (Nl,C)
  // Not scratch but a constant every block reads: the Llama family's rotary table (T, HS),
  // filled at construction.
  DeviceArray<float> rotary;
};

LayerScratch make_layer_scratch(Backend& backend, const ModelConfig& model, const LayerSizes& sizes,
                                const ChunkRecompute& recompute);

}  // namespace gpt
