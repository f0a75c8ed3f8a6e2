// Rotary positions on the CPU, in place: each head's pairs (i, i + HS/2) of every row turn by the
// angles of the row's position, read from the table (cos | sin per position). Rows are
// independent, so the result does not depend on the thread count.
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {

template <bool kBackward>
void rotate_rows(float* x, const float* table, int64_t B, int64_t T, int64_t heads, int64_t HS,
                 int64_t start, int threads) {
  GPT_CHECK(B >= 0 && T >= 0 && heads > 0 && HS > 0 && HS % 2 == 0 && start >= 0,
            "rotary with B=" << B << " T=" << T << " heads=" << heads << " HS=" << HS);
  const int64_t half = HS / 2;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      const float* cosines = table + (start + t) * HS;
      const float* sines = cosines + half;
      float* row = x + (b * T + t) * heads * HS;
      for (int64_t h = 0; h < heads; h++) {
        float* first = row + h * HS;
        float* second = first + half;
#pragma omp simd
        for (int64_t i = 0; i < half; i++) {
          if constexpr (kBackward)
            rotary_turn_back(first[i], second[i], cosines[i], sines[i]);
          else
            rotary_turn(first[i], second[i], cosines[i], sines[i]);
        }
      }
    }
}

}  // namespace

void CpuBackend::rotary_forward(float* x, const float* table, int64_t B, int64_t T, int64_t heads,
                                int64_t HS, int64_t start) {
  rotate_rows<false>(x, table, B, T, heads, HS, start, threads_);
}

void CpuBackend::rotary_backward(float* dx, const float* table, int64_t B, int64_t T, int64_t heads,
                                 int64_t HS, int64_t start) {
  rotate_rows<true>(dx, table, B, T, heads, HS, start, threads_);
}

}  // namespace gpt::cpu
