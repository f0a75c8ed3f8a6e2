// Vocabulary-parallel softmax cross-entropy on the CPU, in the pieces backend.h defines: row max,
// row sum of exponentials, target logit, loss, and the in-place backward. Between the pieces the
// caller reduces the per-row values across tp ranks, so every rank sees the global max and sum.
// Padding columns (j >= V_valid) act as -inf logits: outside the max and the sum, gradient 0.
#include <cmath>
#include <limits>

#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

void CpuBackend::xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V_local,
                              int64_t V_valid) {
  GPT_CHECK(N >= 0 && V_valid >= 0 && V_valid <= V_local,
            "xent_row_max with N=" << N << " V_local=" << V_local << " V_valid=" << V_valid);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const float* row = logits + n * V_local;
    // -inf when this rank holds only padding: the identity of the max all-reduce.
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < V_valid; j++) m = row[j] > m ? row[j] : m;
    row_max[n] = m;
  }
}

void CpuBackend::xent_row_sumexp(float* row_sumexp, const float* logits, const float* row_max,
                                 int64_t N, int64_t V_local, int64_t V_valid) {
  GPT_CHECK(N >= 0 && V_valid >= 0 && V_valid <= V_local,
            "xent_row_sumexp with N=" << N << " V_local=" << V_local << " V_valid=" << V_valid);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const float* row = logits + n * V_local;
    const float m = row_max[n];
    // Double accumulation: a 50k-column row summed in float would lose about four digits.
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < V_valid; j++) s += fast_expf(row[j] - m);
    row_sumexp[n] = static_cast<float>(s);
  }
}

void CpuBackend::xent_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                                   int64_t N, int64_t V_local, int64_t vocab_start) {
  GPT_CHECK(N >= 0 && V_local >= 0, "xent_target_logit with N=" << N << " V_local=" << V_local);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const int64_t j = static_cast<int64_t>(targets[n]) - vocab_start;
    target_logit[n] = (j >= 0 && j < V_local) ? logits[n * V_local + j] : 0.0f;
  }
}

void CpuBackend::xent_loss(float* losses, const float* row_max, const float* row_sumexp,
                           const float* target_logit, int64_t N) {
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++)
    losses[n] = std::log(row_sumexp[n]) + row_max[n] - target_logit[n];
}

void CpuBackend::xent_backward(float* logits, const float* row_max, const float* row_sumexp,
                               const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid,
                               int64_t vocab_start, float loss_scale) {
  GPT_CHECK(N >= 0 && V_valid >= 0 && V_valid <= V_local,
            "xent_backward with N=" << N << " V_local=" << V_local << " V_valid=" << V_valid);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    float* row = logits + n * V_local;
    const float m = row_max[n];
    // Multiplying by the scaled reciprocal once per row instead of dividing per element.
    const float scale_over_sum = loss_scale / row_sumexp[n];
#pragma omp simd
    for (int64_t j = 0; j < V_valid; j++) row[j] = fast_expf(row[j] - m) * scale_over_sum;
    for (int64_t j = V_valid; j < V_local; j++) row[j] = 0.0f;
    const int64_t t = static_cast<int64_t>(targets[n]) - vocab_start;
    if (t >= 0 && t < V_valid) row[t] -= loss_scale;
  }
}

}  // namespace gpt::cpu
