// GptStage: builds the stage's layers, allocates its caches once, runs forward and both
// backward halves over them (see gpt_stage.h).
#include "layers/gpt_stage.h"

#include "framework/check.h"

namespace gpt {

GptStage::GptStage(ParameterStore& store, TensorParallel& tp, const ModelConfig& cfg,
                   const StageSpec& spec, int64_t micro_batch, int num_caches, int num_grad_sets,
                   const ChunkRecompute& recompute)
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

GptStage::Cache GptStage::make_cache() const {
  Cache c;
  for (int64_t l = 0; l <= spec_.n_layers; ++l)
    c.acts.emplace_back(backend_, mb_.residual(), kCache);
  c.tokens = DeviceArray<int32_t>(backend_, mb_.tokens(), kCache);
  c.targets = DeviceArray<int32_t>(backend_, mb_.tokens(), kCache);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    c.blocks.push_back(on_shared_cache(l) ? BlockCache{} : blocks_[l]->make_cache());
    c.stored.push_back(stores(l) ? make_stored_block_cache(backend_, shared_cache_)
                                 : StoredBlockCache{});
  }
  if (head_) c.head = head_->make_cache();
  if (bf16() && !spec_.has_head)
    c.wire = DeviceArray<uint16_t>(backend_, wire_elements(), MemoryCategory::kComm);
  return c;
}

GptStage::GradSet GptStage::make_grad_set() const {
  GradSet g;
  for (int64_t l = 0; l <= spec_.n_layers; ++l)
    g.d_acts.emplace_back(backend_, mb_.residual(), kCache);
  for (size_t l = 0; l < blocks_.size(); ++l)
    g.blocks.push_back(weight_half_at_once(l) ? BlockGrads{} : blocks_[l]->make_grads());
  if (head_) g.head = head_->make_grads();
  if (bf16() && !spec_.has_embedding)
    g.wire = DeviceArray<uint16_t>(backend_, wire_elements(), MemoryCategory::kComm);
  return g;
}

void GptStage::pack_boundary(uint16_t* wire, const float* values) {
  backend_.pack_bf16(wire, values, mb_.residual());
}

void GptStage::unpack_boundary(float* values, const uint16_t* wire) {
  backend_.unpack_bf16(values, wire, mb_.residual());
}

void GptStage::forward(int slot, const int32_t* tokens, const int32_t* targets) {
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

void GptStage::backward_input(int slot, int grad_set, float loss_scale, bool weight_follows) {
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

const BlockCache& GptStage::backward_cache(Cache& c, size_t l) {
  if (stores(l)) return load_stored(c, l);
  if (!recomputes(l)) return c.blocks[l];
  blocks_[l]->forward(scratch_.recomputed_out.data(), c.acts[l].data(), shared_cache_);
  return shared_cache_;
}

BlockCache& GptStage::load_stored(const Cache& c, size_t l) {
  load_block_cache(backend_, c.stored[l], shared_cache_);
  shared_cache_.ln_1.inp = c.acts[l].data();  // the block's input: the one pointer out of it
  return shared_cache_;
}

void GptStage::block_weight_pass(const Cache& c, const GradSet& g, size_t l) {
  // A split W comes after other blocks' passes ran on the shared cache: a stored block loads its
  // cache again. A weight half at once runs right after its input half, on what it left there.
  const BlockCache* cache = &c.blocks[l];
  if (weight_half_at_once(l) && on_shared_cache(l))
    cache = &shared_cache_;
  else if (stores(l))
    cache = &load_stored(c, l);
  blocks_[l]->backward_weight(*cache, block_grads(g, l), g.overlapped_weights_done);
  ready(block_params_[l]);
}

void GptStage::needed(const ParamRange& params) {
  if (params.end == params.first) return;
  if (weight_needed_) weight_needed_(params.first, params.end);
  store_.refresh_compute_copies(params.first, params.end);  // after the gather: its values
}

void GptStage::ready(const ParamRange& params) {
  if (weight_ready_ && params.end > params.first) weight_ready_(params.first, params.end);
}

void GptStage::backward_weight(int slot, int grad_set) {
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

void GptStage::reduce_partial_tp_grads() {
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

double GptStage::loss_sum(int slot, int64_t valid_rows) {
  GPT_CHECK(head_ != nullptr, "only the last stage has a loss");
  const int64_t sequences = valid_rows < 0 ? mb_.B : valid_rows;
  return backend_.sum(caches_[slot].head.losses.data(), sequences * mb_.T);
}

std::vector<float> GptStage::gather_last_logits(int slot, int64_t row) {
  GPT_CHECK(head_ != nullptr, "only the last stage has logits");
  GPT_CHECK(row >= 0 && row < rows(), "logits row " << row << " of " << rows());
  return gather_logits(local_logits(slot) + row * vocab_.count);
}

StageDecodeState GptStage::make_decode_state(const DecodeCapacity& capacity) const {
  GPT_CHECK(!tp_.sequence_parallel(), "generation runs without sequence parallelism");
  GPT_CHECK(capacity.rows >= 1 && capacity.kv_blocks >= 1 && capacity.block_tokens >= 1,
            "a decode state of " << capacity.rows << " rows and " << capacity.kv_blocks
                                 << " blocks of " << capacity.block_tokens << " positions");
  const int64_t R = capacity.rows, C = cfg_.d_model;
  StageDecodeState s;
  s.capacity = capacity;
  s.max_blocks = (cfg_.seq_len + capacity.block_tokens - 1) / capacity.block_tokens;
  const int64_t max_positions = s.max_blocks * capacity.block_tokens;
  for (auto& block : blocks_)
    s.kv.push_back(block->make_kv_cache(capacity.kv_blocks, capacity.block_tokens));
  if (!blocks_.empty()) s.block = blocks_.front()->make_decode_cache(R, max_positions);
  for (int64_t l = 0; l <= spec_.n_layers; ++l) s.acts.emplace_back(backend_, R * C, kDecodeStep);
  if (embedding_) s.tokens = DeviceArray<int32_t>(backend_, R, kDecodeStep);
  s.slots = DeviceArray<int32_t>(backend_, R, kDecodeStep);
  s.block_tables = DeviceArray<int32_t>(backend_, R * s.max_blocks, kDecodeStep);
  s.lengths = DeviceArray<int32_t>(backend_, R, kDecodeStep);
  if (head_) {
    s.head_input = DeviceArray<float>(backend_, R * C, kDecodeStep);
    s.head = head_->make_decode_cache(R);
  }
  return s;
}

void GptStage::decode(StageDecodeState& s, const DecodeBatch& batch) {
  const int64_t R = batch.rows(), C = cfg_.d_model;
  const auto bytes = [](int64_t n) { return sizeof(int32_t) * static_cast<size_t>(n); };
  GPT_CHECK(R >= 1 && R <= s.capacity.rows,
            "a decode step of " << R << " rows (capacity " << s.capacity.rows << ")");
  GPT_CHECK(static_cast<int64_t>(batch.slots.size()) == R &&
                static_cast<int64_t>(batch.block_tables.size()) == R * s.max_blocks &&
                (!embedding_ || static_cast<int64_t>(batch.tokens.size()) == R),
            "a decode step's rows disagree in size");
  const int64_t pool_slots = s.capacity.kv_blocks * s.capacity.block_tokens;
  s.host_lengths.resize(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const int32_t pos = batch.positions[r];
    GPT_CHECK(pos >= 0 && pos < cfg_.seq_len && batch.slots[r] >= 0 &&
                  batch.slots[r] < pool_slots &&
                  batch.block_tables[r * s.max_blocks + pos / s.capacity.block_tokens] ==
                      batch.slots[r] / s.capacity.block_tokens,
              "decode row " << r << " at position " << pos << " into slot " << batch.slots[r]);
    for (int64_t b = 0; b <= pos / s.capacity.block_tokens; ++b) {
      const int32_t block = batch.block_tables[r * s.max_blocks + b];
      GPT_CHECK(block >= 0 && block < s.capacity.kv_blocks,
                "decode row " << r << " reads block " << block);
    }
    s.host_lengths[r] = pos + 1;
  }
  s.positions = batch.positions;
  backend_.copy_from_host(s.slots.data(), batch.slots.data(), bytes(R));
  backend_.copy_from_host(s.block_tables.data(), batch.block_tables.data(),
                          bytes(R * s.max_blocks));
  backend_.copy_from_host(s.lengths.data(), s.host_lengths.data(), bytes(R));
  const DecodeRows rows{.count = R,
                        .positions = s.positions.data(),
                        .slots = s.slots.data(),
                        .block_tables = s.block_tables.data(),
                        .lengths = s.lengths.data(),
                        .max_blocks = s.max_blocks,
                        .block_tokens = s.capacity.block_tokens};
  s.rows = R;
  if (embedding_) {
    backend_.copy_from_host(s.tokens.data(), batch.tokens.data(), bytes(R));
    embedding_->decode(s.acts[0].data(), s.tokens.data(), s.positions.data(), R);
  }
  for (size_t l = 0; l < blocks_.size(); ++l)
    blocks_[l]->decode(s.acts[l + 1].data(), s.acts[l].data(), s.block, s.kv[l], rows);
  if (!head_) return;
  // Only the rows whose next token is wanted go through the head (a prompt's last row, each
  // decoding sequence's row): the vocabulary product is the largest of a small model's step.
  const int64_t L = static_cast<int64_t>(batch.logit_rows.size());
  GPT_CHECK(L <= R, "more logit rows than rows");
  for (int64_t i = 0; i < L; ++i) {
    const int32_t r = batch.logit_rows[i];
    GPT_CHECK(r >= 0 && r < R, "logit row " << r << " of " << R);
    backend_.copy(s.head_input.data() + i * C, s.acts.back().data() + r * C,
                  sizeof(float) * static_cast<size_t>(C));
  }
  s.logit_rows = L;
  if (L > 0) head_->decode(s.head_input.data(), s.head, L);
}

std::vector<std::vector<float>> GptStage::gather_decoded_logits(const StageDecodeState& s) {
  GPT_CHECK(head_ != nullptr, "only the last stage has logits");
  const int64_t L = s.logit_rows, Vl = vocab_.count, tp = tp_.size();
  std::vector<float> local(static_cast<size_t>(L * Vl));
  std::vector<float> gathered(static_cast<size_t>(L * Vl * tp));
  if (L > 0)
    backend_.copy_to_host(local.data(), s.head.logits.data(), sizeof(float) * local.size());
  tp_.comm().all_gather(local.data(), gathered.data(), L * Vl);  // host buffers: MPI
  std::vector<std::vector<float>> logits(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    std::vector<float>& row = logits[i];
    row.resize(static_cast<size_t>(Vl * tp));
    for (int64_t rank = 0; rank < tp; ++rank)
      std::copy_n(gathered.begin() + (rank * L + i) * Vl, Vl, row.begin() + rank * Vl);
    row.resize(static_cast<size_t>(cfg_.vocab_size));  // drop the padding columns
  }
  return logits;
}

std::vector<float> GptStage::gather_logits(const float* local_row) {
  std::vector<float> local(static_cast<size_t>(vocab_.count));
  std::vector<float> gathered(static_cast<size_t>(vocab_.count * tp_.size()));
  backend_.copy_to_host(local.data(), local_row, sizeof(float) * local.size());
  tp_.comm().all_gather(local.data(), gathered.data(), vocab_.count);  // host buffers: MPI
  gathered.resize(static_cast<size_t>(cfg_.vocab_size));               // drop the padding columns
  return gathered;
}

}  // namespace gpt
