// StoredBlockCache (layers/stored_block_cache.h) on the CPU backend: a block cache stored and
// loaded back holds each activation rounded to bf16 (to nearest even) and each statistic exactly,
// whatever the working cache held in between; empty buffers take no storage; and the store's
// activations take 2 bytes an element.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "framework/bf16.h"
#include "layers/stored_block_cache.h"

namespace gpt {
namespace {

std::vector<float> random_values(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(StoredBlockCache, ActivationsComeBackInBf16AndStatisticsExactly) {
  const std::unique_ptr<Backend> be = make_cpu_backend(1, Precision::kBf16);
  const auto array = [&be](int64_t n) { return DeviceArray<float>(*be, n, kCache); };
  // A GPT-2 block without sequence parallelism (no gathered rows, no q/k norms), odd sizes.
  BlockCache working;
  working.ln_1.mean = array(7), working.ln_1.rstd = array(7);
  working.ln1_out = array(7 * 5);
  working.attn.qkv = array(7 * 15), working.attn.att = array(2 * 7 * 7);
  working.attn.atty = array(7 * 5);
  working.res_mid = array(7 * 5);
  working.ln_2.mean = array(7), working.ln_2.rstd = array(7);
  working.ln2_out = array(7 * 5);
  working.mlp.fc_pre = array(7 * 20), working.mlp.fc_act = array(7 * 20);
  const std::vector<DeviceArray<float>*> activations = {
      &working.ln1_out,    &working.attn.qkv, &working.attn.atty,
      &working.res_mid,    &working.ln2_out,  &working.mlp.fc_pre,
      &working.mlp.fc_act, &working.attn.att};  // the CPU's softmax probabilities: an activation
  const std::vector<DeviceArray<float>*> statistics = {&working.ln_1.mean, &working.ln_1.rstd,
                                                       &working.ln_2.mean, &working.ln_2.rstd};
  std::mt19937 rng(7);
  std::vector<std::vector<float>> kept;
  for (auto* group : {&activations, &statistics})
    for (DeviceArray<float>* b : *group) {
      kept.push_back(random_values(b->size(), rng));
      b->upload(kept.back());
    }

  StoredBlockCache stored = make_stored_block_cache(*be, working);
  ASSERT_EQ(stored.activations.size(), activations.size());
  ASSERT_EQ(stored.statistics.size(), statistics.size());
  store_block_cache(*be, working, stored);
  // Another block's forward overwrites the working cache.
  for (auto* group : {&activations, &statistics})
    for (DeviceArray<float>* b : *group) b->upload(random_values(b->size(), rng));
  load_block_cache(*be, stored, working);

  size_t i = 0;
  for (DeviceArray<float>* b : activations) {
    const std::vector<float> got = b->download();
    const std::vector<float>& want = kept[i++];
    int64_t rounded = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k], round_to_bf16(want[k])) << "activation " << i - 1 << " element " << k;
      rounded += got[k] != want[k];
    }
    EXPECT_GT(rounded, 0) << "activation " << i - 1 << " was not rounded";
  }
  for (DeviceArray<float>* b : statistics) EXPECT_EQ(b->download(), kept[i++]);
}

}  // namespace
}  // namespace gpt
