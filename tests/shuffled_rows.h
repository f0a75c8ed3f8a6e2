// Rows of a matrix picked at random in a shuffled order, for the tests that a kernel computing
// token rows alone (matmul_forward_rows) gives each row the same bits wherever it sits in a call,
// on the CPU backend and on CUDA alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace gpt {

// `count` distinct indices of [0, N), in a random order.
template <typename Rng>
std::vector<int64_t> shuffled_rows(int64_t N, int64_t count, Rng& rng) {
  std::vector<int64_t> picked(static_cast<size_t>(N));
  std::iota(picked.begin(), picked.end(), int64_t{0});
  std::shuffle(picked.begin(), picked.end(), rng);
  picked.resize(static_cast<size_t>(count));
  return picked;
}

// The rows `picked` of `matrix` (rows of `width` floats), packed in that order.
inline std::vector<float> gather_rows(const std::vector<float>& matrix,
                                      const std::vector<int64_t>& picked, int64_t width) {
  std::vector<float> out(picked.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < picked.size(); i++)
    std::copy_n(&matrix[static_cast<size_t>(picked[i] * width)], width, &out[i * width]);
  return out;
}

}  // namespace gpt
