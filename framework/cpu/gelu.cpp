// GELU (tanh approximation) forward and backward on the CPU: flat OpenMP loops over the shared
// per-element formulas in elementwise.h, so the CUDA backend computes the same math.
#include <algorithm>

#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {
constexpr int64_t kElementChunk = 8192;
}  // namespace

// Chunks across threads, a vectorised loop inside each chunk.
void CpuBackend::gelu_forward(float* out, const float* inp, int64_t n) {
  const int64_t chunks = (n + kElementChunk - 1) / kElementChunk;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t end = std::min(n, (c + 1) * kElementChunk);
#pragma omp simd
    for (int64_t i = c * kElementChunk; i < end; i++) out[i] = gelu_tanh(inp[i]);
  }
}

// Written, not accumulated: the MLP's activation gradient is the only consumer.
void CpuBackend::gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  const int64_t chunks = (n + kElementChunk - 1) / kElementChunk;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t end = std::min(n, (c + 1) * kElementChunk);
#pragma omp simd
    for (int64_t i = c * kElementChunk; i < end; i++) dinp[i] = gelu_tanh_grad(inp[i]) * dout[i];
  }
}

}  // namespace gpt::cpu
