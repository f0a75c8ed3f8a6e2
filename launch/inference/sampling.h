// Choosing the next token from a row of logits: temperature 0 is greedy (argmax); otherwise
// softmax(logits / temperature) restricted to the top k (k 0 = all), then to the nucleus: the
// likeliest tokens whose probabilities first add up to top_p (1 = all; Holtzman et al. 2019),
// drawn with a uniform number in [0, 1) so the caller decides where randomness comes from (the
// counter RNG: reproducible).
//
// The draw walks the tokens likeliest first (ties: the lower id first) and takes the first at
// which the running sum of weights exceeds uniform * their total (a double product). The weights
// are exp((logit - max) / temperature) in fixed point (2^-62 of the likeliest token's weight; a
// token below that is never drawn), so every sum is exact whatever order it is taken in: the
// walk's token and the nucleus are found by selection within buckets of equal logit width, in
// time linear in the vocabulary, instead of by sorting it.
#pragma once

#include <cstdint>
#include <vector>

namespace gpt {

struct SamplingOptions {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
};

int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options,
                     double uniform);

}  // namespace gpt
