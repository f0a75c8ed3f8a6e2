// Temperature, top-k and top-p sampling (see sampling.h).
#include "launch/inference/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpt {

int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options,
                     double uniform) {
  const double temperature = options.temperature;
  const int64_t top_k = options.top_k;
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  // Highest logit first; ties broken by the lower token id so the choice is deterministic.
  auto higher = [&](int64_t a, int64_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  if (temperature <= 0.0) return *std::min_element(order.begin(), order.end(), higher);
  const int64_t k = top_k > 0 ? std::min(top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), higher);
  std::vector<double> weights(static_cast<size_t>(k));
  const double max_logit = logits[order[0]];
  for (int64_t i = 0; i < k; ++i)
    weights[i] = std::exp((logits[order[i]] - max_logit) / temperature);
  const double all = std::accumulate(weights.begin(), weights.end(), 0.0);
  // The nucleus: the first n tokens (likeliest first) whose share reaches top_p.
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

}  // namespace gpt
