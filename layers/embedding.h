// Token and position embeddings (a position table where the family learns positions, GPT-2's
// wpe; rotary ones are the attention's). The token table wte [V, C] is vocabulary-parallel: tp rank
// r stores rows [r*Vp/tp, (r+1)*Vp/tp) of the padded vocabulary Vp (rows >= V are zero padding,
// never stored in checkpoints); a token outside a rank's rows contributes 0 there and the tp
// all-reduce of the forward (reduce_from_tp_region) assembles the full lookup. wpe [T, C] is
// replicated and added after the reduction. wte is shared with the LM head (tied); with pp > 1 the
// last stage holds a copy (docs/DESIGN.md "Tied embedding").
#pragma once

#include <cstdint>

#include "framework/config.h"
#include "framework/families/model_family.h"
#include "framework/parameter.h"
#include "layers/layer.h"
#include "parallel/parameter_shards.h"

namespace gpt {

// Registers a vocabulary matrix [V, C] of the family's (the token embedding, or an untied head)
// for this tp rank (vocab_shard's rows); tied_copy marks the last stage's copy of a tied one when
// pp > 1.
Parameter& add_vocabulary_matrix(ParameterStore& store, const ModelConfig& cfg,
                                 const std::string& name, int tp_rank, int tp_size, bool tied_copy);

// What the weight gradient reads: the tokens (there is no input gradient to pass on).
struct EmbeddingCache {
  const int32_t* tokens = nullptr;  // (N) forward's tokens in backend memory (the caller's buffer)
};

struct EmbeddingGrads {
  const float* dout = nullptr;  // (Nl,C) the output gradient (the caller's buffer)
};

class Embedding : Layer {
 public:
  // wte: the registered token table; edge: the family's names (a position table or none).
  Embedding(const LayerContext& ctx, const ModelConfig& cfg, const EdgeParameters& edge,
            Parameter& wte);

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
