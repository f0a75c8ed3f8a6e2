// StoredBlockCache: one block's cache as bf16 precision keeps it from a microbatch's forward to
// its backward, Megatron's way: the activations in 16 bits, the norms' and the fused attention's
// statistics in float32. The block itself runs on a float32 BlockCache that its stage shares (the
// working cache): after a block's forward the stage stores the working cache here, and before each
// half of its backward loads it back. Packing rounds to nearest even, so what a backward reads is
// what a 16-bit kernel would have kept; the arithmetic stays float32 on both backends.
#pragma once

#include <vector>

#include "layers/transformer_block.h"

namespace gpt {

struct StoredBlockCache {
  std::vector<DeviceArray<uint16_t>> activations;  // bf16, in BlockCache's order
  std::vector<DeviceArray<float>> statistics;      // float32, likewise
};

// Activations are every buffer of a block cache but the statistics: the norms' mean and rstd
// and, on CUDA, the fused attention's log-sum-exp per row (the CPU's attention cache is the
// softmax probabilities, an activation). The memory model counts the same split
// (LayerSizes::stored_activations).
// A store shaped as `working` (every block of a stage has the same cache shape).
StoredBlockCache make_stored_block_cache(Backend& backend, const BlockCache& working);
void store_block_cache(Backend& backend, BlockCache& working, StoredBlockCache& stored);
// Loads `stored` into `working`. The pointers inside `working` (a linear's input, a norm's input)
// still point where the block's last forward on it set them: the caller re-points ln_1.inp, the
// only one that leaves the cache.
void load_block_cache(Backend& backend, const StoredBlockCache& stored, BlockCache& working);

}  // namespace gpt
