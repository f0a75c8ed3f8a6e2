// Temperature, top-k and top-p sampling by selection over exact fixed-point sums (see
// sampling.h). The candidates are grouped in 4096 buckets of equal width over the logits that
// have a weight, likeliest first; each bucket's weights are summed in one pass, so the running
// sum crosses a target in one bucket, and only that bucket's tokens are selected among: a few
// dozen of a 128k vocabulary spread evenly, all of them only where the logits are all equal.
#include "launch/inference/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace gpt {
namespace {

// A weight is exp((logit - max) / temperature) * 2^62, rounded to an integer: the sum of 2^31
// of them stays below 2^93, and an unsigned 128-bit sum is exact.
using Weight = uint64_t;
using WeightSum = unsigned __int128;
constexpr double kWeightScale = 0x1p62;
// Below this exponent exp(x) * 2^62 < 0.36 rounds to 0 (the threshold is ln(0.5) - 62 ln(2) =
// -43.67): such a token needs no exp and can never be drawn.
constexpr double kNegligibleExponent = -44.0;
// Buckets over the logits that have a weight, [lowest, max], of equal width, likeliest first:
// enough that the crossing bucket holds a few dozen tokens of a 128k vocabulary spread evenly.
constexpr int kBuckets = 4096;

struct Candidate {
  float logit;
  int32_t id;
  Weight weight;
};

// Likeliest first; ties broken by the lower token id, so that the order is total.
bool likelier(const Candidate& a, const Candidate& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

// fraction * total as the double product rounds it (as the sampler before this one computed
// uniform * total and top_p * total, so that ties at a boundary, equal logits say, fall the same
// way), then floored, and kept below total.
WeightSum scaled(WeightSum total, double fraction) {
  const auto product = static_cast<WeightSum>(fraction * static_cast<double>(total));
  return std::min(product, total - 1);
}

WeightSum sum_of(const std::vector<Candidate>& c, size_t begin, size_t end) {
  WeightSum sum = 0;
  for (size_t i = begin; i < end; ++i) sum += c[i].weight;
  return sum;
}

// The position p in `likelier`'s order of the first of c[lo, hi) at which the running sum of
// weights, starting from `before`, exceeds target (before <= target < before + their sum).
// Leaves c[lo, p) the tokens likelier than c[p] and c(p, hi) the others, each in no particular
// order: a quickselect whose partitions are summed on the likelier side, so that it follows the
// running sum without sorting. A median-of-three pivot keeps it linear on sorted rows; past
// 2 log2(n) + 8 rounds (a row built against it) it goes on by halves with std::nth_element,
// linear in the worst case.
size_t select_by_running_sum(std::vector<Candidate>& c, size_t lo, size_t hi, WeightSum before,
                             WeightSum target) {
  const int rounds = 2 * std::bit_width(hi - lo) + 8;
  const auto at = [&](size_t i) { return c.begin() + static_cast<std::ptrdiff_t>(i); };
  for (int round = 0;; ++round) {
    size_t pivot_at;
    if (round < rounds) {
      const size_t mid = lo + (hi - lo) / 2;
      const auto median = [&](size_t a, size_t b, size_t d) {
        if (likelier(c[a], c[b])) std::swap(a, b);  // now c[b] likelier than c[a]
        if (likelier(c[d], c[b])) return b;
        return likelier(c[a], c[d]) ? a : d;  // c[b] the likeliest: the likelier of a and d
      };
      std::swap(c[lo], c[median(lo, mid, hi - 1)]);
      const Candidate pivot = c[lo];
      const auto split = std::partition(at(lo + 1), at(hi),
                                        [&](const Candidate& x) { return likelier(x, pivot); });
      pivot_at = static_cast<size_t>(split - c.begin()) - 1;
      std::swap(c[lo], c[pivot_at]);  // the likelier ones in [lo, pivot_at), the pivot after
    } else {
      pivot_at = lo + (hi - lo) / 2;
      std::nth_element(at(lo), at(pivot_at), at(hi), likelier);
    }
    const WeightSum upto = before + sum_of(c, lo, pivot_at);
    if (upto > target) {
      hi = pivot_at;
    } else if (upto + c[pivot_at].weight > target) {
      return pivot_at;
    } else {
      before = upto + c[pivot_at].weight;
      lo = pivot_at + 1;
    }
  }
}

}  // namespace

int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options,
                     double uniform) {
  const int64_t V = static_cast<int64_t>(logits.size());
  // The likeliest token, the lowest id among equal logits.
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  if (options.temperature <= 0.0) return best;
  const double max_logit = logits[best];
  // The members: the top k when k < V, else every token.
  std::vector<Candidate> ranked;
  const bool top_k = options.top_k > 0 && options.top_k < V;
  if (top_k) {
    ranked.resize(static_cast<size_t>(V));
    for (int64_t i = 0; i < V; ++i) ranked[i] = {logits[i], static_cast<int32_t>(i), 0};
    std::nth_element(ranked.begin(), ranked.begin() + (options.top_k - 1), ranked.end(), likelier);
    ranked.resize(static_cast<size_t>(options.top_k));
  }
  const size_t n = top_k ? ranked.size() : static_cast<size_t>(V);
  const auto member = [&](size_t j) {
    return top_k ? ranked[j] : Candidate{logits[j], static_cast<int32_t>(j), 0};
  };
  const auto exponent_of = [&](float logit) {
    return (static_cast<double>(logit) - max_logit) / options.temperature;
  };
  const auto weight_of = [](double exponent) -> Weight {
    if (exponent < kNegligibleExponent) return 0;
    return static_cast<Weight>(std::exp(exponent) * kWeightScale + 0.5);  // rounded
  };
  // The lowest logit with a weight, which with the highest bounds the buckets.
  float lowest = static_cast<float>(max_logit);
  for (size_t j = 0; j < n; ++j) {
    const float logit = member(j).logit;
    if (logit < lowest && exponent_of(logit) >= kNegligibleExponent) lowest = logit;
  }
  // bucket floor((max - logit) * scale): monotone in the logit, so a likelier token is never in
  // a later bucket, and equal logits share one.
  const double scale = lowest < max_logit ? (kBuckets - 1) / (max_logit - lowest) : 0.0;
  // Each member's weight and bucket (kNoBucket: a weight of 0) and each bucket's sum, in one pass.
  constexpr uint16_t kNoBucket = kBuckets;
  std::vector<uint16_t> bucket(n, kNoBucket);
  std::vector<Weight> weights(n);
  std::vector<WeightSum> sums(kBuckets);
  WeightSum total = 0;
  for (size_t j = 0; j < n; ++j) {
    const float logit = member(j).logit;
    const Weight weight = weight_of(exponent_of(logit));
    if (weight == 0) continue;
    const auto b = static_cast<uint16_t>(
        std::min<double>(std::floor((max_logit - logit) * scale), kBuckets - 1));
    weights[j] = weight;
    bucket[j] = b;
    sums[b] += weight;
    total += weight;
  }
  // A bucket's members with their weights.
  const auto gather = [&](int b) {
    std::vector<Candidate> out;
    for (size_t j = 0; j < n; ++j) {
      if (bucket[j] != b) continue;
      Candidate m = member(j);
      m.weight = weights[j];
      out.push_back(m);
    }
    return out;
  };
  // The nucleus: the likeliest tokens up to the first whose running sum reaches top_p of all;
  // it ends in bucket `cut`, of which `edge` holds the nucleus's members.
  int cut = kBuckets;
  std::vector<Candidate> edge;
  WeightSum edge_sum = 0;
  if (options.top_p < 1.0) {
    const WeightSum target = std::max<WeightSum>(scaled(total, options.top_p), 1) - 1;
    WeightSum before = 0;
    for (cut = 0; before + sums[cut] <= target; ++cut) before += sums[cut];
    edge = gather(cut);
    edge.resize(select_by_running_sum(edge, 0, edge.size(), before, target) + 1);
    edge_sum = sum_of(edge, 0, edge.size());
    total = before + edge_sum;
  }
  // The draw: the bucket in which the running sum exceeds uniform * total, then its member.
  const WeightSum target = scaled(total, uniform);
  WeightSum before = 0;
  for (int b = 0;; ++b) {
    const WeightSum in_bucket = b == cut ? edge_sum : sums[b];
    if (before + in_bucket > target) {
      std::vector<Candidate> members = b == cut ? std::move(edge) : gather(b);
      return members[select_by_running_sum(members, 0, members.size(), before, target)].id;
    }
    before += in_bucket;
  }
}

}  // namespace gpt
