// Token and position embeddings (positions are GPT-2's only: the Llama family's are rotary, in
// its attention). wte [V, C] is vocabulary-parallel: tp rank r stores rows
// [r*Vp/tp, (r+1)*Vp/tp) of the padded vocabulary Vp (rows >= V are zero padding, never stored in
// checkpoints); a token outside a rank's rows contributes 0 there and the tp all-reduce of the
// forward (reduce_from_tp_region) assembles the full lookup. wpe [T, C] is replicated and added
// after the reduction. wte is shared with the LM head (tied); with pp > 1 the last stage holds a
// copy (docs/DESIGN.md "Tied embedding").
#pragma once

#include <cstdint>

#include "framework/config.h"
#include "framework/parameter.h"
#include "layers/layer.h"

namespace gpt {

// The token embedding's checkpoint name: "wte" (GPT-2), "embed_tokens.weight" (Llama family);
// and the untied head's, "lm_head.weight".
const char* token_embedding_name(const ModelConfig& cfg);
inline constexpr const char* kUntiedHeadName = "lm_head.weight";

// Registers the token embedding for this tp rank; tied_copy marks the last stage's copy when
// pp > 1. add_untied_head registers the Llama family's own output matrix, split alike.
Parameter& add_token_embedding(ParameterStore& store, const ModelConfig& cfg, int tp_rank,
                               int tp_size, bool tied_copy);
Parameter& add_untied_head(ParameterStore& store, const ModelConfig& cfg, int tp_rank, int tp_size);

// The vocabulary rows of wte this rank stores: [start, start + count), count = Vp/tp.
struct VocabShard {
  int64_t start;
  int64_t count;  // stored rows (padding included)
  int64_t valid;  // rows below the real vocabulary size V
};
VocabShard vocab_shard(const ModelConfig& cfg, int tp_rank, int tp_size);

// What the weight gradient reads: the tokens (there is no input gradient to pass on).
struct EmbeddingCache {
  const int32_t* tokens = nullptr;  // (N) forward's tokens in backend memory (the caller's buffer)
};

struct EmbeddingGrads {
  const float* dout = nullptr;  // (Nl,C) the output gradient (the caller's buffer)
};

class Embedding : Layer {
 public:
  Embedding(const LayerContext& ctx, const ModelConfig& cfg, Parameter& wte);

  // out (Nl,C) = wte[tokens] + wpe[positions] for tokens (N): all rows, or this rank's rows of
  // the sum with sequence parallelism (reduce-scattered).
  void forward(float* out, const int32_t* tokens, EmbeddingCache& cache);
  // Generation: out (R,C) = wte[tokens] + wpe[positions] for R token rows: tokens in backend
  // memory, positions in host memory (decode_rows.h).
  void decode(float* out, const int32_t* tokens, const int32_t* positions, int64_t rows);
  // dwte, dwpe += from grads.dout.
  void backward_weight(const EmbeddingCache& cache, const EmbeddingGrads& grads);

 private:
  int64_t C_;
  VocabShard shard_;
  Parameter& wte_;
  Parameter* wpe_ = nullptr;  // GPT-2
};

}  // namespace gpt
