// Reductions on the CPU, as the CUDA backend's reductions.cu: the column sums of the bias
// gradient and whole-buffer sums (loss sums, gradient norms). Both sum in double in a fixed order,
// so results are bit-identical whatever the thread count: a column is summed by one thread in row
// order; a buffer is cut into a fixed number of contiguous chunks whose sums are added in order
// (OpenMP's reduction clause combines partial sums in arrival order, which is not fixed).

#include "framework/check.h"
#include "framework/cpu/column_blocks.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {

constexpr int64_t kChunks = 256;  // chunks of a whole-buffer sum

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

void CpuBackend::bias_backward(float* dbias, const float* dout, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C >= 0, "bias_backward with N=" << N << " C=" << C);
  // Double accumulators: N (= B*T) rows of gradients summed in float would lose digits.
  for_each_column_block(C, threads_, [&](int64_t c0, int64_t width) {
    double acc[kColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const float* row = dout + n * C + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; c++) acc[c] += row[c];
    }
    add_column_sums(dbias + c0, acc, width);
  });
}

double CpuBackend::sum(const float* x, int64_t n) {
  return chunked_sum(x, n, threads_, [](double v) { return v; });
}

double CpuBackend::sum_squares(const float* x, int64_t n) {
  return chunked_sum(x, n, threads_, [](double v) { return v * v; });
}

}  // namespace gpt::cpu
