// The planner's serving model (parallel/planner/serving_model.h) on the cluster presets: a lone
// request's decode is its weights over HBM bandwidth, tp halves that read but adds its
// all-reduces, pp leaves a lone request's TPOT alone but carries more sequences at once, PCIe
// makes tp's all-reduces a larger share of a step than NVLink does, the key/value cache caps the
// concurrency, and the layouts plan --serve prices.
#include <gtest/gtest.h>

#include "framework/check.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/link_model.h"
#include "parallel/planner/serving_model.h"

namespace gpt {
namespace {

// Meta-Llama-3-8B's shape (its config.json): 32 layers, 32 heads of 128, 8 kv heads, MLP 14336,
// vocabulary 128256, untied head.
ModelConfig llama3_8b() {
  ModelConfig m{32, 32, 4096, 8192, 128256};
  m.arch = Arch::kLlama;
  m.n_kv_head = 8;
  m.ffn_hidden = 14336;
  return m;
}

ServingSetup setup(const ModelConfig& m, const char* cluster, int tp, int pp, double bytes = 4) {
  ServingSetup s{m, {}, cluster_preset(cluster), bytes};
  s.layout.tp = tp;
  s.layout.pp = pp;
  return s;
}

const ServingRequest kShort{1, 1};  // a lone token: the cache is negligible beside the weights
const ServingRequest kChat{512, 128};

TEST(ServingModel, LoneRequestDecodeIsItsWeightBytesOverHbmBandwidth) {
  const ModelConfig m = llama3_8b();
  const ServingSetup s = setup(m, "dgx-h100", 1, 1);
  // Every weight but the input embedding's (a lookup), 4 bytes each, at the streaming rate the
  // presets give: 3350 GB/s at 85%.
  const double read = static_cast<double>(m.num_parameters(true) - m.padded_vocab(1) * m.d_model);
  const double expected = read * 4 / (3350e9 * 0.85);
  EXPECT_NEAR(time_per_output_token(s, kShort) / expected, 1.0, 0.01);  // within 1%
  const StageStep step = serving_step(s, decode_rows(1, 1)).stages[0];
  EXPECT_GT(step.memory_s, 20 * step.compute_s);  // far from the FLOP rate
  EXPECT_EQ(step.tp_s, 0);
  EXPECT_EQ(step.hop_s, 0);
}

TEST(ServingModel, TpHalvesTheWeightReadButAddsTwoAllReducesPerLayer) {
  const ModelConfig m = llama3_8b();
  const StageStep one = serving_step(setup(m, "dgx-h100", 1, 1), decode_rows(1, 576)).stages[0];
  const ServingSetup s2 = setup(m, "dgx-h100", 2, 1);
  const StageStep two = serving_step(s2, decode_rows(1, 576)).stages[0];
  EXPECT_NEAR(two.memory_s / one.memory_s, 0.5, 0.01);  // the norms stay whole on each rank
  // Two all-reduces a layer and the embedding's of one row of d_model floats, and the sampled
  // row's logits all-gathered.
  const LinkModel link = cluster_preset("dgx-h100").intra_node;
  const double reduce = collective_seconds(link, Collective::kAllReduce, 4096.0 * 4, 2);
  const double gather = collective_seconds(link, Collective::kAllGather,
                                           static_cast<double>(m.padded_vocab(2)) * 4, 2);
  EXPECT_NEAR(two.tp_s, 65 * reduce + gather, 1e-12);
  // On NVLink the halved read outweighs the all-reduces: tp lowers TPOT and TTFT.
  EXPECT_LT(time_per_output_token(s2, kChat),
            0.7 * time_per_output_token(setup(m, "dgx-h100", 1, 1), kChat));
  EXPECT_LT(time_to_first_token(s2, kChat),
            0.7 * time_to_first_token(setup(m, "dgx-h100", 1, 1), kChat));
}

TEST(ServingModel, PpKeepsLoneTpotButServesMoreSequences) {
  const ModelConfig m = llama3_8b();
  const ServingSetup one = setup(m, "dgx-h100", 1, 1, 2), pp2 = setup(m, "dgx-h100", 1, 2, 2);
  // A lone request passes both stages in turn: no faster than one GPU, slower by the hops.
  EXPECT_GE(time_per_output_token(pp2, kChat), time_per_output_token(one, kChat));
  EXPECT_LT(time_per_output_token(pp2, kChat), 1.02 * time_per_output_token(one, kChat));
  // The memory-bound regime (16-bit weights on the tensor cores): at a concurrency one GPU's
  // cache cannot hold, two stages hold more and read half the cache each.
  const int64_t cap = max_sequences(one, kChat);
  EXPECT_GT(max_sequences(pp2, kChat), 2 * cap);
  const StageStep step = serving_step(one, decode_rows(static_cast<double>(cap), 576)).stages[0];
  EXPECT_GT(step.memory_s, step.compute_s);
  EXPECT_GT(serving_throughput(pp2, kChat, 2 * cap), 1.5 * serving_throughput(one, kChat, cap));
  // At a concurrency both hold, pp's groups each reread the weights: little gain.
  EXPECT_LT(serving_throughput(pp2, kChat, 16), 1.3 * serving_throughput(one, kChat, 16));
}

StageStep tp8_step(const char* cluster, double batch) {
  return serving_step(setup(llama3_8b(), cluster, 8, 1), decode_rows(batch, 576)).stages[0];
}

TEST(ServingModel, PcieMakesTpAllReducesALargeShare) {
  // 64 sequences at tp 8: each all-reduce moves 1 MB. PCIe's (20 GB/s bus bandwidth, 5.7 us a
  // step) take over 4 times NVLink's and over 40% of the step; the L40S's memory is slower
  // too, which keeps the share from growing as much.
  const StageStep pcie = tp8_step("l40s-pcie", 64), nvlink = tp8_step("dgx-h100", 64);
  EXPECT_GT(pcie.tp_s, 4 * nvlink.tp_s);
  EXPECT_GT(pcie.tp_s / pcie.busy(), 0.4);
}

TEST(ServingModel, ThroughputIsCappedByTheCache) {
  const ModelConfig m = llama3_8b();
  const ServingSetup s = setup(m, "dgx-h100", 1, 1);
  // 72 GB (90% of 80) less 32 GB of fp32 weights, over 640 tokens x 32 layers x 8 kv heads x
  // 128 x 2 (key and value) x 4 bytes.
  const double weights = static_cast<double>(m.num_parameters(true)) * 4;
  const double per_sequence = 640.0 * 32 * 8 * 128 * 2 * 4;
  const int64_t cap = max_sequences(s, kChat);
  EXPECT_NEAR(static_cast<double>(cap), (72e9 - weights) / per_sequence, 1.0);
  const ServingPrediction p = predict_serving(s, kChat, {1, cap, 4 * cap});
  EXPECT_EQ(p.throughput[2].running, cap);
  EXPECT_DOUBLE_EQ(p.throughput[2].tokens_per_s, p.throughput[1].tokens_per_s);
  // fp32 on the CUDA cores: the full cache's steps and the 512-token prefills are FLOP-bound.
  EXPECT_GT(p.throughput[1].tokens_per_s, 5 * p.throughput[0].tokens_per_s);
  // 70B's fp32 weights fit no single 80 GB GPU.
  ModelConfig big{80, 64, 8192, 8192, 128256};
  big.arch = Arch::kLlama;
  big.n_kv_head = 8;
  big.ffn_hidden = 28672;
  EXPECT_EQ(max_sequences(setup(big, "dgx-h100", 1, 1), kChat), 0);
  EXPECT_GT(max_sequences(setup(big, "dgx-h100", 8, 1), kChat), 0);
}

TEST(ServingModel, LayoutsArePowersOfTwoTheModelSplitsInto) {
  const ModelConfig gpt2{12, 12, 768, 1024, 50257};
  const Cluster h100 = cluster_preset("dgx-h100");
  // tp in {1, 2, 4} (12 heads), pp in {1, 2, 4} (12 layers), tp x pp at most 8.
  const std::vector<PlanLayout> node = serving_layouts(gpt2, h100, 8, 1, false);
  EXPECT_EQ(node.size(), 8u);
  for (const PlanLayout& l : node) EXPECT_LE(l.tp * l.pp, 8);
  // Two nodes add tp 4 x pp 4 across them.
  const std::vector<PlanLayout> two = serving_layouts(gpt2, h100, 16, 2, false);
  EXPECT_EQ(two.size(), 9u);
  EXPECT_EQ(serving_layouts(gpt2, h100, 8, 1, false, 2, 0).size(), 3u);
  EXPECT_THROW(serving_layouts(gpt2, h100, 8, 1, false, 5, 0), Error);
}

}  // namespace
}  // namespace gpt
