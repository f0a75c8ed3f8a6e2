// Whole-buffer reductions on the CPU (loss sums, gradient norms). The buffer is cut into a fixed
// number of contiguous chunks, each summed in double, and the chunk sums are added in order: the
// result is accurate and bit-identical whatever the thread count (OpenMP's reduction clause
// combines partial sums in arrival order, which is not).
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {

constexpr int64_t kChunks = 256;

template <typename Term>
double chunked_sum(const float* x, int64_t n, int threads, Term term) {
  GPT_CHECK(n >= 0, "reduction over a negative count " << n);
  double partial[kChunks] = {};
  const int64_t chunk = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t k = 0; k < kChunks; k++) {
    const int64_t begin = k * chunk;
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = begin; i < end; i++) acc += term(static_cast<double>(x[i]));
    partial[k] = acc;
  }
  double total = 0.0;
  for (int64_t k = 0; k < kChunks; k++) total += partial[k];
  return total;
}

}  // namespace

double CpuBackend::sum(const float* x, int64_t n) {
  return chunked_sum(x, n, threads_, [](double v) { return v; });
}

double CpuBackend::sum_squares(const float* x, int64_t n) {
  return chunked_sum(x, n, threads_, [](double v) { return v * v; });
}

}  // namespace gpt::cpu
