// Optimizer updates on the CPU: one flat loop over a contiguous slice of the parameter buffer,
// applying the per-element torch.optim formulas from elementwise.h (shared with CUDA).
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {
constexpr int64_t kElementChunk = 16384;
}  // namespace

void CpuBackend::adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                              int64_t n, const AdamWStep& step) {
  const AdamWStep s = step;  // a local copy lets the compiler keep the scalars in registers
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
  for (int64_t i = 0; i < n; i++) adamw_element(param[i], grad[i], exp_avg[i], exp_avg_sq[i], s);
}

void CpuBackend::sgd_update(float* param, const float* grad, float* momentum_buffer, int64_t n,
                            const SgdStep& step) {
  const SgdStep s = step;
  if (momentum_buffer == nullptr) {  // plain SGD keeps no buffer
    GPT_CHECK(s.momentum == 0.0f, "sgd_update with momentum " << s.momentum << " needs a buffer");
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
    for (int64_t i = 0; i < n; i++) {
      float unused = 0.0f;
      sgd_element(param[i], grad[i], unused, s);
    }
    return;
  }
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
  for (int64_t i = 0; i < n; i++) sgd_element(param[i], grad[i], momentum_buffer[i], s);
}

}  // namespace gpt::cpu
