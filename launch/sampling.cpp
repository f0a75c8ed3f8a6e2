// Temperature and top-k sampling (see sampling.h).
#include "launch/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpt {

int64_t sample_token(const std::vector<float>& logits, double temperature, int64_t top_k,
                     double uniform) {
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
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double threshold = uniform * total;
  for (int64_t i = 0; i < k; ++i) {
    threshold -= weights[i];
    if (threshold < 0.0) return order[i];
  }
  return order[k - 1];
}

}  // namespace gpt
