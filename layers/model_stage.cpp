// ModelStage, the composition: builds the stage's layers from the model family's description, and
// runs forward and both backward halves over them (see model_stage.h; the cache policy is
// stage_caches.cpp's, generation stage_decode.cpp's).
#include "layers/model_stage.h"

#include "framework/check.h"

namespace gpt {

ModelStage::ModelStage(ParameterStore& store, TensorParallel& tp, const ModelConfig& cfg,
                       const StageSpec& spec, int64_t micro_batch, int num_caches,
                       int num_grad_sets, const ChunkRecompute& recompute)
    : backend_(store.backend()),
      tp_(tp),
      store_(store),
      cfg_(cfg),
      spec_(spec),
      recompute_(recompute),
      mb_(layer_sizes(cfg, tp.size(), tp.sequence_parallel(), micro_batch, backend_.kind(),
                      recompute.mode)),
      vocab_(vocab_shard(cfg, tp.rank(), tp.size())),
      scratch_(make_layer_scratch(backend_, cfg, mb_, recompute)) {
  GPT_CHECK(spec.n_layers >= 1 || spec.has_embedding || spec.has_head,
            "a stage without the embedding or the head needs at least one layer");
  GPT_CHECK(recompute.full_blocks >= 0 && recompute.full_blocks <= spec.n_layers,
            "recomputing " << recompute.full_blocks << " of " << spec.n_layers << " blocks");
  GPT_CHECK(num_caches >= 1 && num_grad_sets >= 1, "a stage needs a cache and a gradient set");
  const LayerContext ctx{store, tp, mb_, scratch_};
  const ModelFamily& family = family_of(cfg);
  const BlockDescription description = family.describe(cfg);
  const EdgeParameters edge = family.edge_parameters(cfg);
  // Registration order is the flat buffers' order.
  Parameter* wte = nullptr;
  auto registered = [&store] { return store.params().size(); };
  if (spec.has_embedding) {
    embedding_params_.first = registered();
    wte = &add_vocabulary_matrix(store, cfg, edge.token_embedding, tp.rank(), tp.size(), false);
    embedding_ = std::make_unique<Embedding>(ctx, cfg, edge, *wte);
    embedding_params_.end = registered();
  }
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const size_t first = registered();
    blocks_.push_back(std::make_unique<TransformerBlock>(
        ctx, cfg, family.block_parameters(cfg, spec.first_layer + l, tp.size()), description));
    block_params_.push_back({first, registered()});
  }
  if (spec.has_head) {
    head_params_.first = registered();
    if (!description.tied_head)
      wte = &add_vocabulary_matrix(store, cfg, edge.untied_head, tp.rank(), tp.size(), false);
    else if (wte == nullptr)
      wte = &add_vocabulary_matrix(store, cfg, edge.token_embedding, tp.rank(), tp.size(),
                                   spec.tied_copy);
    head_ = std::make_unique<LmHead>(ctx, cfg, edge.final_norm, *wte);
    head_params_.end = registered();
  }

  if (bf16() && !(spec.has_embedding && spec.has_head))
    receive_wire_ = DeviceArray<uint16_t>(backend_, wire_elements(), MemoryCategory::kComm);
  const bool any_stored = !blocks_.empty() && stores(blocks_.size() - 1);
  if (recompute.full_blocks > 0 || any_stored) shared_cache_ = blocks_.front()->make_cache();
  bool any_at_once = false;
  for (size_t l = 0; l < blocks_.size(); ++l) any_at_once = any_at_once || weight_half_at_once(l);
  if (any_at_once) shared_grads_ = blocks_.front()->make_grads();
  for (int i = 0; i < num_caches; ++i) caches_.push_back(make_cache());
  for (int i = 0; i < num_grad_sets; ++i) grad_sets_.push_back(make_grad_set());
}

void ModelStage::forward(int slot, const int32_t* tokens, const int32_t* targets) {
  Cache& c = caches_[slot];
  const size_t token_bytes = sizeof(int32_t) * static_cast<size_t>(rows());
  if (embedding_) {
    GPT_CHECK(tokens != nullptr, "the first stage needs input tokens");
    backend_.copy_from_host(c.tokens.data(), tokens, token_bytes);
    needed(embedding_params_);
    embedding_->forward(c.acts[0].data(), c.tokens.data(), c.embedding);
  }
  for (size_t l = 0; l < blocks_.size(); ++l) {
    needed(block_params_[l]);
    blocks_[l]->forward(c.acts[l + 1].data(), c.acts[l].data(),
                        on_shared_cache(l) ? shared_cache_ : c.blocks[l]);
    if (stores(l)) store_block_cache(backend_, shared_cache_, c.stored[l]);
  }
  if (head_) {
    GPT_CHECK(targets != nullptr, "the last stage needs targets");
    backend_.copy_from_host(c.targets.data(), targets, token_bytes);
    needed(head_params_);  // with pp = 1 and a tied head, wte came with the embedding
    head_->forward(c.acts.back().data(), c.targets.data(), c.head);
  }
}

void ModelStage::backward_input(int slot, int grad_set, float loss_scale, bool weight_follows) {
  Cache& c = caches_[slot];
  GradSet& g = grad_sets_[grad_set];
  g.overlapped_weights_done = weight_follows && tp_.overlaps_comm();
  if (head_)
    head_->backward_input(g.d_acts.back().data(), loss_scale, c.head, g.head,
                          g.overlapped_weights_done);
  for (size_t l = blocks_.size(); l-- > 0;) {
    blocks_[l]->backward_input(g.d_acts[l].data(), g.d_acts[l + 1].data(), backward_cache(c, l),
                               block_grads(g, l), g.overlapped_weights_done);
    // Its cache is the shared one, which the next block reuses, or nobody waits for the input
    // gradient: the weight half now, from the chunk's shared BlockGrads.
    if (weight_half_at_once(l)) block_weight_pass(c, g, l);
  }
}

void ModelStage::needed(const ParamRange& params) {
  if (params.end == params.first) return;
  if (weight_needed_) weight_needed_(params.first, params.end);
  store_.refresh_compute_copies(params.first, params.end);  // after the gather: its values
}

void ModelStage::ready(const ParamRange& params) {
  if (weight_ready_ && params.end > params.first) weight_ready_(params.first, params.end);
}

void ModelStage::backward_weight(int slot, int grad_set) {
  const Cache& c = caches_[slot];
  const GradSet& g = grad_sets_[grad_set];
  if (head_) {
    head_->backward_weight(c.head, g.head, g.overlapped_weights_done);
    ready(head_params_);  // with pp = 1 wte is the embedding's: final only after it
  }
  for (size_t l = blocks_.size(); l-- > 0;)
    if (!weight_half_at_once(l)) block_weight_pass(c, g, l);
  if (embedding_) {
    embedding_->backward_weight(c.embedding, {.dout = g.d_acts.front().data()});
    ready(embedding_params_);
  }
}

void ModelStage::reduce_partial_tp_grads() {
  // The gradients the optimizer reads: under the distributed optimizer this rank's dp shard of
  // them, which covers the same elements on every tp rank (their layouts are identical).
  for (Parameter& p : store_.params()) {
    if (p.tp_partial_grad) {
      for (const StatePiece& piece : store_.state_pieces(p))
        tp_.all_reduce(store_.update_grads() + piece.state_offset, piece.numel, ReduceOp::kSum);
    }
    if (p.tp_replicas > 1) {
      // Shared key/value heads: each group of tp_replicas ranks sums its own slab. One all-reduce
      // over tp of every group's slot (the others' zero) sums each group's alone; in host memory
      // (the MPI path), as the slabs are small: one kv head's rows.
      const int64_t groups = tp_.size() / p.tp_replicas, slot = tp_.rank() / p.tp_replicas;
      for (const StatePiece& piece : store_.state_pieces(p)) {
        std::vector<float> slots(static_cast<size_t>(groups * piece.numel), 0.0f);
        float* mine = slots.data() + slot * piece.numel;
        float* grad = store_.update_grads() + piece.state_offset;
        const size_t bytes = sizeof(float) * static_cast<size_t>(piece.numel);
        backend_.copy_to_host(mine, grad, bytes);
        tp_.comm().all_reduce(slots.data(), static_cast<int64_t>(slots.size()), ReduceOp::kSum);
        backend_.copy_from_host(grad, mine, bytes);
      }
    }
  }
}

double ModelStage::loss_sum(int slot, int64_t valid_rows) {
  GPT_CHECK(head_ != nullptr, "only the last stage has a loss");
  const int64_t sequences = valid_rows < 0 ? mb_.B : valid_rows;
  return backend_.sum(caches_[slot].head.losses.data(), sequences * mb_.T);
}

std::vector<float> ModelStage::gather_last_logits(int slot, int64_t row) {
  GPT_CHECK(head_ != nullptr, "only the last stage has logits");
  GPT_CHECK(row >= 0 && row < rows(), "logits row " << row << " of " << rows());
  return gather_logits(local_logits(slot) + row * vocab_.count);
}

std::vector<float> ModelStage::gather_logits(const float* local_row) {
  std::vector<float> local(static_cast<size_t>(vocab_.count));
  std::vector<float> gathered(static_cast<size_t>(vocab_.count * tp_.size()));
  backend_.copy_to_host(local.data(), local_row, sizeof(float) * local.size());
  tp_.comm().all_gather(local.data(), gathered.data(), vocab_.count);  // host buffers: MPI
  gathered.resize(static_cast<size_t>(cfg_.vocab_size));               // drop the padding columns
  return gathered;
}

}  // namespace gpt
