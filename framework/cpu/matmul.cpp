// Linear layers on the CPU: forward, input gradient and weight gradient, all three through
// oneDNN's row-major dnnl_sgemm with the weight in nn.Linear layout (OC, IC). The bias column
// sums reuse bias_backward, which is deterministic whatever the thread count. In bf16 precision
// each product reads rounded copies of its two operands (bf16_operands.cpp): operand_a_ holds
// the first (the input, or the output's gradient), operand_b_ the second (a weight is widened
// from its compute copy when it has one).
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstring>

#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/cpu/sgemm.h"

namespace gpt::cpu {

void sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  dnnl_status_t status = dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  GPT_CHECK(status == dnnl_success, "dnnl_sgemm(" << transa << transb << ", M=" << M << " N=" << N
                                                  << " K=" << K << ") failed with status "
                                                  << static_cast<int>(status));
}

void CpuBackend::matmul_forward(float* out, const float* inp, WeightOperand weight,
                                const float* bias, int64_t N, int64_t IC, int64_t OC) {
  GPT_CHECK(N >= 0 && IC > 0 && OC > 0,
            "matmul_forward with N=" << N << " IC=" << IC << " OC=" << OC);
  if (N == 0) return;
  // Seeding the output with the bias and letting sgemm add the product (beta 1) costs one pass
  // over `out` instead of two.
  float beta = 0.0f;
  if (bias != nullptr) {
    const size_t row_bytes = sizeof(float) * static_cast<size_t>(OC);
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t n = 0; n < N; n++) std::memcpy(out + n * OC, bias, row_bytes);
    beta = 1.0f;
  }
  inp = bf16_operand(operand_a_, inp, N * IC);
  const float* w = weight_operand(weight, OC * IC);
  omp_set_num_threads(threads_);  // sgemm threads by the calling thread's OpenMP setting
  sgemm('N', 'T', N, OC, IC, 1.0f, inp, IC, w, IC, beta, out, OC);
}

void CpuBackend::matmul_backward_input(float* dinp, const float* dout, WeightOperand weight,
                                       int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  GPT_CHECK(N >= 0 && IC > 0 && OC > 0,
            "matmul_backward_input with N=" << N << " IC=" << IC << " OC=" << OC);
  if (N == 0) return;
  dout = bf16_operand(operand_a_, dout, N * OC);
  const float* w = weight_operand(weight, OC * IC);
  omp_set_num_threads(threads_);
  sgemm('N', 'N', N, IC, OC, 1.0f, dout, OC, w, IC, accumulate ? 1.0f : 0.0f, dinp, IC);
}

void CpuBackend::matmul_backward_weight(float* dweight, float* dbias, const float* dout,
                                        const float* inp, int64_t N, int64_t IC, int64_t OC) {
  GPT_CHECK(N >= 0 && IC > 0 && OC > 0,
            "matmul_backward_weight with N=" << N << " IC=" << IC << " OC=" << OC);
  if (N == 0) return;
  // The bias gradient sums the float32 gradient, as the CUDA backend's column sums do.
  if (dbias != nullptr) bias_backward(dbias, dout, N, OC);
  dout = bf16_operand(operand_a_, dout, N * OC);
  inp = bf16_operand(operand_b_, inp, N * IC);
  omp_set_num_threads(threads_);
  sgemm('T', 'N', OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
}

}  // namespace gpt::cpu
