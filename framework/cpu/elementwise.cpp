// Elementwise kernels on the CPU: GELU and SwiGLU forward and backward (the shared per-element
// formulas of elementwise.h, as the CUDA backend's elementwise.cu), the residual stream's
// accumulate and scale, and the bias add. Flat OpenMP loops written to vectorise; every element is
// computed alone, so results do not depend on the thread count.
#include <algorithm>

#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {
constexpr int64_t kGeluChunk = 8192;      // elements per task in the GELU loops
constexpr int64_t kElementChunk = 16384;  // elements per task in the other flat loops
}  // namespace

// Chunks across threads, a vectorised loop inside each chunk.
void CpuBackend::gelu_forward(float* out, const float* inp, int64_t n) {
  const int64_t chunks = (n + kGeluChunk - 1) / kGeluChunk;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t end = std::min(n, (c + 1) * kGeluChunk);
#pragma omp simd
    for (int64_t i = c * kGeluChunk; i < end; i++) out[i] = gelu_tanh(inp[i]);
  }
}

// Written, not accumulated: the MLP's activation gradient is the only consumer.
void CpuBackend::gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  const int64_t chunks = (n + kGeluChunk - 1) / kGeluChunk;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t end = std::min(n, (c + 1) * kGeluChunk);
#pragma omp simd
    for (int64_t i = c * kGeluChunk; i < end; i++) dinp[i] = gelu_tanh_grad(inp[i]) * dout[i];
  }
}

void CpuBackend::swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for simd schedule(static, kGeluChunk) num_threads(threads_)
  for (int64_t i = 0; i < n; i++) out[i] = swiglu_output(gate[i], up[i]);
}

// Written, not accumulated: gate and up have no other consumer.
void CpuBackend::swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                                 const float* up, int64_t n) {
#pragma omp parallel for simd schedule(static, kGeluChunk) num_threads(threads_)
  for (int64_t i = 0; i < n; i++) {
    dgate[i] = swiglu_dgate(dout[i], gate[i], up[i]);
    dup[i] = swiglu_dup(dout[i], gate[i]);
  }
}

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

}  // namespace gpt::cpu
