// GptStage: builds the stage's layers, allocates its caches once, runs forward and both
// backward halves over them (see gpt_stage.h).
#include "layers/gpt_stage.h"

#include "framework/check.h"

namespace gpt {

GptStage::GptStage(ParameterStore& store, TensorParallel& tp, const ModelConfig& cfg,
                   const StageSpec& spec, int64_t micro_batch, int num_caches, int num_grad_sets)
    : backend_(store.backend()),
      tp_(tp),
      store_(store),
      cfg_(cfg),
      spec_(spec),
      B_(micro_batch),
      vocab_(vocab_shard(cfg, tp.rank(), tp.size())) {
  GPT_CHECK(spec.n_layers >= 1, "a stage needs at least one layer");
  GPT_CHECK(num_caches >= 1 && num_grad_sets >= 1, "a stage needs a cache and a gradient set");
  // Registration order is the flat buffers' order.
  Parameter* wte = nullptr;
  auto registered = [&store] { return store.params().size(); };
  if (spec.has_embedding) {
    embedding_params_.first = registered();
    wte = &add_token_embedding(store, cfg, tp.rank(), tp.size(), false);
    embedding_ = std::make_unique<Embedding>(store, tp, cfg, *wte);
    embedding_params_.end = registered();
  }
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const size_t first = registered();
    blocks_.push_back(std::make_unique<TransformerBlock>(store, tp, spec.first_layer + l, cfg));
    block_params_.push_back({first, registered()});
  }
  if (spec.has_head) {
    head_params_.first = registered();
    if (wte == nullptr)
      wte = &add_token_embedding(store, cfg, tp.rank(), tp.size(), spec.tied_copy);
    head_ = std::make_unique<LmHead>(store, tp, cfg, *wte);
    head_params_.end = registered();
  }

  const int64_t N = rows(), Nl = local_rows(), C = cfg.d_model;
  for (int i = 0; i < num_caches; ++i) {
    Cache c;
    for (int64_t l = 0; l <= spec.n_layers; ++l) c.acts.emplace_back(backend_, Nl * C);
    for (auto& block : blocks_) c.blocks.push_back(block->make_cache(B_));
    if (head_) c.head = head_->make_cache(B_);
    c.tokens = DeviceArray<int32_t>(backend_, N);
    c.targets = DeviceArray<int32_t>(backend_, N);
    caches_.push_back(std::move(c));
  }
  for (int i = 0; i < num_grad_sets; ++i) {
    GradSet g;
    for (auto& block : blocks_) g.blocks.push_back(block->make_grads(B_));
    if (head_) g.head = head_->make_grads(B_);
    g.d_input = DeviceArray<float>(backend_, Nl * C);
    grad_sets_.push_back(std::move(g));
  }
  scratch_ = blocks_.front()->make_scratch(B_);
}

float* GptStage::output_grad(int grad_set) {
  return grad_sets_[grad_set].blocks.back().d_out.data();
}

void GptStage::forward(int slot, const int32_t* tokens, const int32_t* targets) {
  Cache& c = caches_[slot];
  const size_t token_bytes = sizeof(int32_t) * static_cast<size_t>(rows());
  if (embedding_) {
    GPT_CHECK(tokens != nullptr, "the first stage needs input tokens");
    backend_.copy_from_host(c.tokens.data(), tokens, token_bytes);
    embedding_->forward(c.acts[0].data(), c.tokens.data(), B_, scratch_.partial.data());
  }
  for (size_t l = 0; l < blocks_.size(); ++l)
    blocks_[l]->forward(c.acts[l + 1].data(), c.acts[l].data(), c.blocks[l], scratch_, B_);
  if (head_) {
    GPT_CHECK(targets != nullptr, "the last stage needs targets");
    backend_.copy_from_host(c.targets.data(), targets, token_bytes);
    head_->forward(c.acts.back().data(), c.targets.data(), c.head, scratch_.ln_local.data(), B_);
  }
}

void GptStage::backward_input(int slot, int grad_set, float loss_scale) {
  Cache& c = caches_[slot];
  GradSet& g = grad_sets_[grad_set];
  if (head_)
    head_->backward_input(g.blocks.back().d_out.data(), c.acts.back().data(), c.targets.data(),
                          c.head, g.head, loss_scale, scratch_.partial.data(), B_);
  for (size_t l = blocks_.size(); l-- > 0;) {
    float* dinp = l > 0 ? g.blocks[l - 1].d_out.data() : g.d_input.data();
    blocks_[l]->backward_input(dinp, c.acts[l].data(), c.blocks[l], g.blocks[l], scratch_, B_);
  }
}

void GptStage::backward_weight(int slot, int grad_set) {
  Cache& c = caches_[slot];
  GradSet& g = grad_sets_[grad_set];
  auto ready = [this](const ParamRange& r) {
    if (weight_ready_ && r.end > r.first) weight_ready_(r.first, r.end);
  };
  if (head_) {
    head_->backward_weight(c.acts.back().data(), c.head, g.head, B_);
    ready(head_params_);  // with pp = 1 wte is the embedding's: final only after it
  }
  for (size_t l = blocks_.size(); l-- > 0;) {
    blocks_[l]->backward_weight(c.acts[l].data(), c.blocks[l], g.blocks[l], B_);
    ready(block_params_[l]);
  }
  if (embedding_) {
    embedding_->backward_weight(g.d_input.data(), c.tokens.data(), B_, scratch_.partial.data());
    ready(embedding_params_);
  }
}

void GptStage::reduce_sequence_parallel_grads() {
  for (Parameter& p : store_.params())
    if (p.tp_partial_grad) tp_.all_reduce(p.grad, p.numel(), ReduceOp::kSum);
}

double GptStage::loss_sum(int slot, int64_t valid_rows) {
  GPT_CHECK(head_ != nullptr, "only the last stage has a loss");
  const int64_t sequences = valid_rows < 0 ? B_ : valid_rows;
  return backend_.sum(caches_[slot].head.losses.data(), sequences * cfg_.seq_len);
}

}  // namespace gpt
