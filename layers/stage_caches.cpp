// ModelStage's cache policy (see model_stage.h): what each microbatch's cache and each gradient set
// hold (a block's own cache, none for a block recomputed in full, a 16-bit StoredBlockCache under
// bf16), the cache a block's backward reads (its own, its stored one loaded into the shared cache,
// or its forward re-run there), where its weight half runs, and the 16-bit pipeline messages.
#include "layers/model_stage.h"

#include "framework/check.h"

namespace gpt {

ModelStage::Cache ModelStage::make_cache() const {
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

ModelStage::GradSet ModelStage::make_grad_set() const {
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

void ModelStage::pack_boundary(uint16_t* wire, const float* values) {
  backend_.pack_bf16(wire, values, mb_.residual());
}

void ModelStage::unpack_boundary(float* values, const uint16_t* wire) {
  backend_.unpack_bf16(values, wire, mb_.residual());
}

const BlockCache& ModelStage::backward_cache(Cache& c, size_t l) {
  if (stores(l)) return load_stored(c, l);
  if (!recomputes(l)) return c.blocks[l];
  blocks_[l]->forward(scratch_.recomputed_out.data(), c.acts[l].data(), shared_cache_);
  return shared_cache_;
}

BlockCache& ModelStage::load_stored(const Cache& c, size_t l) {
  load_block_cache(backend_, c.stored[l], shared_cache_);
  shared_cache_.ln_1.inp = c.acts[l].data();  // the block's input: the one pointer out of it
  return shared_cache_;
}

void ModelStage::block_weight_pass(const Cache& c, const GradSet& g, size_t l) {
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

}  // namespace gpt
