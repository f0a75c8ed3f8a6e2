// Column sums over rows on the CPU (bias, LayerNorm weight and token embedding gradients), split
// by blocks of columns: each column is summed by one thread in row order, so results do not
// depend on the thread count and no two threads write the same element.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpt::cpu {

inline constexpr int64_t kColumnBlock = 64;  // columns per task

// Calls f(c0, width) for the columns c0 .. c0 + width - 1 of each block of the C columns (the
// last block may be narrower), one block per task over `threads` OpenMP threads.
template <typename F>
void for_each_column_block(int64_t C, int threads, F f) {
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t blk = 0; blk < blocks; blk++) {
    const int64_t c0 = blk * kColumnBlock;
    f(c0, std::min(kColumnBlock, C - c0));
  }
}

// dst[c] += sums[c] for c < width, added in double and rounded once to float.
inline void add_column_sums(float* dst, const double* sums, int64_t width) {
  for (int64_t c = 0; c < width; c++) dst[c] = static_cast<float>(dst[c] + sums[c]);
}

}  // namespace gpt::cpu
