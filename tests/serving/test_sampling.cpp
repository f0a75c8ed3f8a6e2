// sample_token (launch/inference/sampling.h) against the sampler it replaced, which sorted the
// candidates and walked them summing double weights: the same token for the same logits,
// options and uniform number, over rows of several sizes and spreads (ties included), every
// temperature, top-k and top-p kind, and uniform numbers near both ends of [0, 1). And the ids that
// end a generation (launch/inference/stop_tokens.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "framework/check.h"
#include "framework/text/text_tokenizer.h"
#include "launch/inference/sampling.h"
#include "launch/inference/stop_tokens.h"

namespace gpt {
namespace {

// The sorting sampler, as it was: partial sort by logit (ties: lower id first), double weights,
// the nucleus by a running share, the draw by subtracting weights from uniform * total.
int64_t sorting_sampler(const std::vector<float>& logits, const SamplingOptions& options,
                        double uniform) {
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&](int64_t a, int64_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  if (options.temperature <= 0.0) return *std::min_element(order.begin(), order.end(), higher);
  const int64_t k = options.top_k > 0 ? std::min(options.top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), higher);
  std::vector<double> weights(static_cast<size_t>(k));
  const double max_logit = logits[order[0]];
  for (int64_t i = 0; i < k; ++i)
    weights[i] = std::exp((logits[order[i]] - max_logit) / options.temperature);
  const double all = std::accumulate(weights.begin(), weights.end(), 0.0);
  int64_t n = k;
  if (options.top_p < 1.0) {
    double share = 0.0;
    for (n = 0; n < k && share < options.top_p * all;) share += weights[n++];
  }
  const double total = std::accumulate(weights.begin(), weights.begin() + n, 0.0);
  double threshold = uniform * total;
  for (int64_t i = 0; i < n; ++i) {
    threshold -= weights[i];
    if (threshold < 0.0) return order[i];
  }
  return order[n - 1];
}

TEST(Sampling, DrawsWhatTheSortingSamplerDrew) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const SamplingOptions kinds[] = {{0.0, 0, 1.0}, {1.0, 0, 1.0},  {0.8, 0, 1.0},
                                   {0.3, 0, 0.9}, {1.7, 40, 1.0}, {0.7, 5, 0.5},
                                   {1.0, 1, 1.0}, {1.0, 0, 0.01}, {2.0, 100000, 0.95}};
  int64_t draws = 0, distinct_tokens = 0;
  for (const int64_t V : {1, 2, 7, 1000, 50257}) {
    for (const double spread : {0.01, 1.0, 4.0, 30.0}) {
      for (const bool ties : {false, true}) {
        std::normal_distribution<float> normal(0.0f, static_cast<float>(spread));
        std::vector<float> logits(static_cast<size_t>(V));
        for (float& x : logits) x = ties ? std::round(normal(rng)) : normal(rng);
        for (const SamplingOptions& options : kinds) {
          std::vector<int64_t> seen;
          for (int i = 0; i < 24; ++i) {
            // Not nearer 1 than 2^-20: the sorting sampler's double sums, over up to 50,257
            // weights, were off by up to about V * 2^-53 of the total, which decided among the
            // least likely tokens at the very top of [0, 1) (and at 1 - 2^-53 its walk could end
            // without a token and return the least likely one, whatever its weight). This one's
            // sums are exact; the two differ only where uniform * total falls within that
            // rounding of a boundary.
            const double uniform = i == 0 ? 0.0 : i == 1 ? 1.0 - 0x1p-20 : unit(rng);
            const int64_t token = sample_token(logits, options, uniform);
            ASSERT_EQ(token, sorting_sampler(logits, options, uniform))
                << "V " << V << " spread " << spread << " ties " << ties << " temperature "
                << options.temperature << " top_k " << options.top_k << " top_p " << options.top_p
                << " uniform " << uniform;
            seen.push_back(token);
            ++draws;
          }
          std::sort(seen.begin(), seen.end());
          distinct_tokens += std::unique(seen.begin(), seen.end()) - seen.begin();
        }
      }
    }
  }
  EXPECT_EQ(draws, 5 * 4 * 2 * 9 * 24);
  EXPECT_GT(distinct_tokens, 1000);  // the draws spread over many tokens, not the likeliest only
}

// The top-k and nucleus bounds hold: no token outside the k likeliest, none outside the nucleus.
TEST(Sampling, KeepsToTheTopKAndTheNucleus) {
  std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f, -1.0f};  // likeliest: 1, 3, 2, 0, 4
  for (int i = 0; i < 200; ++i) {
    const double uniform = i / 200.0;
    const int64_t top2 = sample_token(logits, {1.0, 2, 1.0}, uniform);
    EXPECT_TRUE(top2 == 1 || top2 == 3) << top2;
    // exp(0), exp(-1), ...: token 1 alone holds 0.64 of the mass, with token 3 0.87.
    EXPECT_EQ(sample_token(logits, {1.0, 0, 0.6}, uniform), 1);
    const int64_t nucleus = sample_token(logits, {1.0, 0, 0.8}, uniform);
    EXPECT_TRUE(nucleus == 1 || nucleus == 3) << nucleus;
  }
  EXPECT_EQ(sample_token(logits, {0.0, 0, 1.0}, 0.5), 1);
  EXPECT_EQ(sample_token({2.0f, 2.0f, 1.0f}, {0.0, 0, 1.0}, 0.5), 0);  // a tie: the lower id
}

// Llama 3's tokenizer ends with <|end_of_text|> (128001, tokenizer_config.json's eos_token); an
// instruct model's imported config.json and generation_config.json add the end of turn
// <|eot_id|> (128009) and <|eom_id|> (128008), an id past the model's embedding is dropped, and a
// malformed list is one error naming the checkpoint. GPT-2's <|endoftext|> ends GPT-2's.
TEST(StopTokens, FromTheTokenizerAndTheImportedConfigs) {
  const Gpt2Files gpt2{std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/encoder.json",
                       std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/vocab.bpe"};
  const TextTokenizer llama3(std::string(GPT_SOURCE_DIR) + "/third_party/hf/llama3", gpt2);
  EXPECT_EQ(stop_token_ids(llama3, Json::object(), 128256, "ck.h5"),
            (std::vector<int32_t>{128001}));
  const Json extras = {{"eos_token_id", 128009},
                       {"generation_config", {{"eos_token_id", {128001, 128008, 128009, 200000}}}}};
  EXPECT_EQ(stop_token_ids(llama3, extras, 128256, "ck.h5"),
            (std::vector<int32_t>{128001, 128008, 128009}));
  const Json bad = {{"generation_config", {{"eos_token_id", "<|eot_id|>"}}}};
  try {
    stop_token_ids(llama3, bad, 128256, "ck.h5");
    FAIL() << "a text eos_token_id was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ck.h5: hf: generation_config: eos_token_id must be"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(stop_token_ids(TextTokenizer("gpt2", gpt2), Json::object(), 50257, "ck.h5"),
            (std::vector<int32_t>{50256}));
  EXPECT_TRUE(stop_token_ids(TextTokenizer("bytes", gpt2), Json::object(), 256, "ck.h5").empty());
}

}  // namespace
}  // namespace gpt
