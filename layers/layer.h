// What every layer of a stage is built with and keeps: where its parameters are registered (and
// its buffers live), its tensor-parallel group, the microbatch shape it runs on (so forward and
// backward take no sizes), and the stage's shared scratch. The stage makes one LayerContext and
// hands it to each layer; a layer derives from Layer to keep the parts it uses.
#pragma once

#include "framework/memory_ledger.h"
#include "framework/parameter.h"
#include "layers/layer_scratch.h"
#include "parallel/layer_sizes.h"
#include "parallel/tensor_parallel.h"

namespace gpt {

struct LayerContext {
  ParameterStore& store;
  TensorParallel& tp;
  LayerSizes mb;  // the microbatch shape and the floats of every buffer (memory_model.h)
  LayerScratch& scratch;
};

// Caches and gradient sets: what the schedule keeps per microbatch in flight.
inline constexpr MemoryCategory kCache = MemoryCategory::kActivations;
// Generation: the key/value cache lives across tokens; a decode step's buffers only within it.
inline constexpr MemoryCategory kKvCache = MemoryCategory::kActivations;
inline constexpr MemoryCategory kDecodeStep = MemoryCategory::kWorkspace;

class Layer {
 protected:
  explicit Layer(const LayerContext& ctx)
      : backend_(ctx.store.backend()), tp_(ctx.tp), mb_(ctx.mb), scratch_(ctx.scratch) {}

  // The residual stream and its gradient are stored in bf16 under bf16 precision (Megatron's
  // regime): their values are rounded where each is written, in every layout alike, so the
  // pipeline can carry them as 16-bit messages that lose nothing.
  void store_residual(float* x, int64_t n) {
    if (backend_.precision() == Precision::kBf16) backend_.round_to_bf16(x, n);
  }

  Backend& backend_;
  TensorParallel& tp_;
  LayerSizes mb_;
  LayerScratch& scratch_;  // read only inside one call: nothing in a cache points into it
};

}  // namespace gpt
