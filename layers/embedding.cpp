// Vocabulary-parallel token embedding and replicated position embedding (see embedding.h).
#include "layers/embedding.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

Parameter& add_vocabulary_matrix(ParameterStore& store, const ModelConfig& cfg,
                                 const std::string& name, int tp_rank, int tp_size,
                                 bool tied_copy) {
  const VocabShard shard = vocab_shard(cfg, tp_rank, tp_size);
  ParameterSpec spec{};
  spec.name = name;
  spec.shape = {cfg.vocab_size, cfg.d_model};
  spec.local_numel = shard.count * cfg.d_model;
  if (shard.valid > 0) spec.slabs = {{{shard.start, 0}, {shard.valid, cfg.d_model}, 0}};
  spec.init = InitKind::kNormal;
  spec.init_std = family_of(cfg).edge_parameters(cfg).init_std;
  spec.weight_decay = true;
  spec.tied_copy = tied_copy;
  spec.own_bucket = name == family_of(cfg).edge_parameters(cfg).token_embedding;
  return store.add(std::move(spec));
}

Embedding::Embedding(const LayerContext& ctx, const ModelConfig& cfg, const EdgeParameters& edge,
                     Parameter& wte)
    : Layer(ctx), C_(cfg.d_model), shard_(vocab_shard(cfg, tp_.rank(), tp_.size())), wte_(wte) {
  if (edge.positions.empty()) return;
  ParameterSpec spec{};
  spec.name = edge.positions;
  spec.shape = {cfg.seq_len, cfg.d_model};
  spec.local_numel = cfg.seq_len * cfg.d_model;
  spec.slabs = {{{0, 0}, {cfg.seq_len, cfg.d_model}, 0}};
  spec.init = InitKind::kNormal;
  spec.init_std = edge.init_std;
  spec.weight_decay = true;
  spec.tp_replicated = true;
  wpe_ = &ctx.store.add(std::move(spec));
}

void Embedding::forward(float* out, const int32_t* tokens, EmbeddingCache& cache) {
  cache.tokens = tokens;
  const int64_t N = mb_.N;
  if (!tp_.sequence_parallel()) {
    backend_.embedding_forward(out, tokens, wte_.value, N, C_, shard_.start, shard_.count);
    tp_.reduce_from_tp_region(out, N * C_);
    if (wpe_) backend_.position_embedding_forward(out, wpe_->value, mb_.B, mb_.T, C_);
    store_residual(out, N * C_);
    return;
  }
  // Each token's row is nonzero on exactly one rank, so tp rank 0 adding wpe before the
  // reduce-scatter gives the same sums as adding it after.
  float* full = scratch_.partial.data();
  backend_.embedding_forward(full, tokens, wte_.value, N, C_, shard_.start, shard_.count);
  if (wpe_ && tp_.rank() == 0)
    backend_.position_embedding_forward(full, wpe_->value, mb_.B, mb_.T, C_);
  tp_.reduce_scatter_rows(out, full, mb_.Nl, C_);
  store_residual(out, mb_.Nl * C_);
}

void Embedding::decode(float* out, const int32_t* tokens, const int32_t* positions, int64_t rows) {
  backend_.embedding_forward(out, tokens, wte_.value, rows, C_, shard_.start, shard_.count);
  tp_.reduce_decode_rows(out, rows * C_);
  if (!wpe_) return;
  // Each row gets the wpe row of its own position: a position embedding of one sequence of one
  // token, row by row.
  for (int64_t r = 0; r < rows; ++r) {
    GPT_CHECK(positions[r] >= 0 && positions[r] < mb_.T,
              "decode at position " << positions[r] << " of " << mb_.T);
    backend_.position_embedding_forward(out + r * C_, wpe_->value + positions[r] * C_, 1, 1, C_);
  }
}

void Embedding::backward_weight(const EmbeddingCache& cache, const EmbeddingGrads& grads) {
  const float* dout = grads.dout;
  if (tp_.sequence_parallel()) {  // every vocabulary shard needs every token's gradient
    tp_.gather_rows(scratch_.partial.data(), dout, mb_.Nl, C_);
    dout = scratch_.partial.data();
  }
  backend_.embedding_backward(wte_.grad, dout, cache.tokens, mb_.N, C_, shard_.start, shard_.count);
  if (wpe_) backend_.position_embedding_backward(wpe_->grad, dout, mb_.B, mb_.T, C_);
}

}  // namespace gpt
