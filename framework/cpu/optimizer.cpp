// Optimizer updates on the CPU: one flat loop per run of the parameter buffer,
// applying the per-element torch.optim formulas from elementwise.h (shared with CUDA).
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {
constexpr int64_t kElementChunk = 16384;
}  // namespace

void CpuBackend::adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                              std::span<const ParameterRun> runs, const AdamWStep& decayed,
                              const AdamWStep& undecayed) {
  for (const ParameterRun& run : runs) {
    const AdamWStep s = run.weight_decay ? decayed : undecayed;  // a local copy stays in registers
    float* p = param + run.offset;
    const float* g = grad + run.offset;
    float* m = exp_avg + run.offset;
    float* v = exp_avg_sq + run.offset;
    const int64_t n = run.numel;
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
    for (int64_t i = 0; i < n; i++) adamw_element(p[i], g[i], m[i], v[i], s);
  }
}

void CpuBackend::sgd_update(float* param, const float* grad, float* momentum_buffer,
                            std::span<const ParameterRun> runs, const SgdStep& decayed,
                            const SgdStep& undecayed) {
  for (const ParameterRun& run : runs) {
    const SgdStep s = run.weight_decay ? decayed : undecayed;
    float* p = param + run.offset;
    const float* g = grad + run.offset;
    const int64_t n = run.numel;
    if (momentum_buffer == nullptr) {  // plain SGD keeps no buffer
      GPT_CHECK(s.momentum == 0.0f, "sgd_update with momentum " << s.momentum << " needs a buffer");
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
      for (int64_t i = 0; i < n; i++) {
        float unused = 0.0f;
        sgd_element(p[i], g[i], unused, s);
      }
      continue;
    }
    float* buf = momentum_buffer + run.offset;
#pragma omp parallel for simd schedule(static, kElementChunk) num_threads(threads_)
    for (int64_t i = 0; i < n; i++) sgd_element(p[i], g[i], buf[i], s);
  }
}

}  // namespace gpt::cpu
