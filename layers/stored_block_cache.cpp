// StoredBlockCache: bf16 storage of a block's cache between forward and backward (see the header).
#include "layers/stored_block_cache.h"

#include <type_traits>

#include "framework/check.h"

namespace gpt {

namespace {

// Calls visit(buffer, activation) for each non-empty buffer of a block cache: the same order
// every time.
template <typename Cache, typename Visit>
void for_each_buffer(Cache& c, DeviceKind kind, Visit visit) {
  using Buffer =
      std::conditional_t<std::is_const_v<Cache>, const DeviceArray<float>, DeviceArray<float>>;
  Buffer* const activations[] = {
      &c.ln1_out, &c.attn.c_attn.gathered, &c.attn.qkv,   &c.attn.qk_pre, &c.attn.atty, &c.res_mid,
      &c.ln2_out, &c.mlp.c_fc.gathered,    &c.mlp.fc_pre, &c.mlp.fc_act};
  Buffer* const statistics[] = {&c.ln_1.mean,        &c.ln_1.rstd,        &c.attn.q_norm.mean,
                                &c.attn.q_norm.rstd, &c.attn.k_norm.mean, &c.attn.k_norm.rstd,
                                &c.ln_2.mean,        &c.ln_2.rstd};
  for (Buffer* b : activations)
    if (b->size() > 0) visit(*b, true);
  for (Buffer* b : statistics)
    if (b->size() > 0) visit(*b, false);
  // The CPU's attention cache holds the softmax probabilities (an activation); CUDA's fused
  // kernel keeps each row's log-sum-exp, a statistic, as Megatron keeps its softmax statistics.
  if (c.attn.att.size() > 0) visit(c.attn.att, attention_cache_is_quadratic(kind));
}

}  // namespace

StoredBlockCache make_stored_block_cache(Backend& backend, const BlockCache& working) {
  StoredBlockCache stored;
  for_each_buffer(working, backend.kind(), [&](const DeviceArray<float>& b, bool activation) {
    if (activation)
      stored.activations.emplace_back(backend, b.size(), kCache);
    else
      stored.statistics.emplace_back(backend, b.size(), kCache);
  });
  return stored;
}

void store_block_cache(Backend& backend, BlockCache& working, StoredBlockCache& stored) {
  size_t a = 0, s = 0;
  for_each_buffer(working, backend.kind(), [&](DeviceArray<float>& b, bool activation) {
    if (activation)
      backend.pack_bf16(stored.activations.at(a++).data(), b.data(), b.size());
    else
      backend.copy(stored.statistics.at(s++).data(), b.data(),
                   sizeof(float) * static_cast<size_t>(b.size()));
  });
  GPT_CHECK(a == stored.activations.size() && s == stored.statistics.size(),
            "a stored block cache shaped unlike the working cache");
}

void load_block_cache(Backend& backend, const StoredBlockCache& stored, BlockCache& working) {
  size_t a = 0, s = 0;
  for_each_buffer(working, backend.kind(), [&](DeviceArray<float>& b, bool activation) {
    if (activation)
      backend.unpack_bf16(b.data(), stored.activations.at(a++).data(), b.size());
    else
      backend.copy(b.data(), stored.statistics.at(s++).data(),
                   sizeof(float) * static_cast<size_t>(b.size()));
  });
  GPT_CHECK(a == stored.activations.size() && s == stored.statistics.size(),
            "a stored block cache shaped unlike the working cache");
}

}  // namespace gpt
