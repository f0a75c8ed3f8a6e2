// Residual-stream and bias kernels on the CPU: accumulate, scale, add_bias and the bias gradient.
// The column sums split the work over blocks of columns, so each column is summed by one thread
// in row order: the result does not depend on the thread count.
#include <algorithm>

#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {
constexpr int64_t kColumnBlock = 64;      // columns per task in the column sums
constexpr int64_t kElementChunk = 16384;  // elements per task in the flat loops
}  // namespace

void CpuBackend::accumulate(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
  for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void CpuBackend::scale(float* x, float factor, int64_t n) {
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
  for (int64_t i = 0; i < n; i++) x[i] *= factor;
}

void CpuBackend::add_bias(float* out, const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    float* row = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) row[c] += bias[c];
  }
}

void CpuBackend::bias_backward(float* dbias, const float* dout, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C >= 0, "bias_backward with N=" << N << " C=" << C);
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  // Double accumulators: N (= B*T) rows of gradients summed in float would lose digits.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t blk = 0; blk < blocks; blk++) {
    const int64_t c0 = blk * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, C - c0);
    double acc[kColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const float* row = dout + n * C + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; c++) acc[c] += row[c];
    }
    for (int64_t c = 0; c < width; c++) dbias[c0 + c] = static_cast<float>(dbias[c0 + c] + acc[c]);
  }
}

}  // namespace gpt::cpu
