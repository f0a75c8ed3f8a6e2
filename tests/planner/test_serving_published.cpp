// The serving model against published 16-bit serving figures, priced at 2 bytes a weight
// (docs/TP-VS-PP.md, "Against published serving figures", prints this table):
//  - NVIDIA NeMo Framework user guide, performance/llama.html, "Inference Performance",
//    configuration 1 (chatbot: 128 input tokens, 20 output tokens), Llama-2-7B at batch size 1,
//    TP 1/2/4/8, average end-to-end latency in ms on A100 80GB SXM4 and H100 80GB HBM3
//    (TensorRT-LLM; the table gives no precision: fp16 assumed).
//  - PyTorch blog, "Accelerating Inference on Llama 2 with PyTorch compile" (IBM Research and
//    Meta): Llama-2-70B, one request, 8 A100 GPUs with tensor parallelism, 29 ms per token.
// The model prices the hardware's rates alone (no kernel launches, no framework time, ideal
// kernels), so it predicts less than was measured; the test holds the ratio in a stated band and
// checks that what it leaves out is about the same at every tp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "parallel/planner/serving_model.h"

namespace gpt {
namespace {

// Llama 2's shapes (their config.json): vocabulary 32000, untied head, 4096 positions.
ModelConfig llama2(int64_t layers, int64_t heads, int64_t kv_heads, int64_t width, int64_t ffn) {
  ModelConfig m{layers, heads, width, 4096, 32000};
  m.arch = Arch::kLlama;
  m.n_kv_head = kv_heads;
  m.ffn_hidden = ffn;
  return m;
}

ServingSetup fp16(const ModelConfig& m, const char* cluster, int tp) {
  ServingSetup s{m, {}, cluster_preset(cluster), 2};
  s.layout.tp = tp;
  return s;
}

// A request's end-to-end latency alone: its first token, then one decode step per other token.
double latency(const ServingSetup& s, const ServingRequest& r) {
  return time_to_first_token(s, r) +
         static_cast<double>(r.output_tokens - 1) * time_per_output_token(s, r);
}

struct Published {
  const char* cluster;
  int tp;
  double ms;
};

TEST(ServingPublished, NemoLlama2_7bLatencyByTp) {
  const ModelConfig m = llama2(32, 32, 32, 4096, 11008);
  const ServingRequest chat{128, 20};
  const Published runs[] = {{"dgx-a100", 1, 234.0}, {"dgx-a100", 2, 171.7}, {"dgx-a100", 4, 143.7},
                            {"dgx-a100", 8, 136.5}, {"dgx-h100", 1, 153.8}, {"dgx-h100", 2, 128.6},
                            {"dgx-h100", 4, 107.4}, {"dgx-h100", 8, 97.6}};
  std::printf(
      "| cluster | tp | published ms | predicted ms | predicted / published | "
      "published - predicted ms |\n");
  // Per cluster, the least and most of what the model leaves out.
  std::map<std::string, std::pair<double, double>> left_out;
  for (const Published& p : runs) {
    const double predicted = latency(fp16(m, p.cluster, p.tp), chat) * 1e3;
    const double ratio = predicted / p.ms, rest = p.ms - predicted;
    std::printf("| %s | %d | %.1f | %.1f | %.2f | %.1f |\n", p.cluster, p.tp, p.ms, predicted,
                ratio, rest);
    // Below the measurement (the hardware's rates alone), by at most 3x.
    EXPECT_LT(ratio, 1.0) << p.cluster << " tp " << p.tp;
    EXPECT_GT(ratio, 0.3) << p.cluster << " tp " << p.tp;
    auto [it, fresh] = left_out.try_emplace(p.cluster, rest, rest);
    it->second = {std::min(it->second.first, rest), std::max(it->second.second, rest)};
  }
  // What the model leaves out is nearly the same at every tp (about 3 ms a token on H100, 4 on
  // A100: per-step time no rate explains, such as kernel launches and sampling), so the model
  // orders the layouts as measured while underpricing each by that constant.
  for (const auto& [cluster, range] : left_out)
    EXPECT_LT(range.second / range.first, 1.3) << cluster;
}

TEST(ServingPublished, PytorchLlama2_70bTpotOnEightA100) {
  const ModelConfig m = llama2(80, 64, 8, 8192, 28672);
  const double predicted = time_per_output_token(fp16(m, "dgx-a100", 8), {128, 128}) * 1e3;
  std::printf("| dgx-a100 | 8 | 29 (TPOT) | %.1f (TPOT) | %.2f |\n", predicted, predicted / 29);
  EXPECT_LT(predicted, 29);
  EXPECT_GT(predicted, 29 / 3.0);
}

}  // namespace
}  // namespace gpt
