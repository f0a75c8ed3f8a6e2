// Choosing the next token from a row of logits: temperature 0 is greedy (argmax); otherwise
// softmax(logits / temperature) restricted to the top k (k 0 = all), drawn with a uniform number
// in [0, 1) so the caller decides where randomness comes from (the counter RNG: reproducible).
#pragma once

#include <cstdint>
#include <vector>

namespace gpt {

int64_t sample_token(const std::vector<float>& logits, double temperature, int64_t top_k,
                     double uniform);

}  // namespace gpt
