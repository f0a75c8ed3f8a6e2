// RMSNorm on the CPU (the Llama family's norm, also each head's q and k norm in Qwen3): forward
// keeping rstd per row, the input gradient accumulated into the residual stream's gradient, and
// the weight gradient as column sums over row blocks (independent of the thread count), as
// layernorm.cpp does for LayerNorm. Row sums in double.
#include <cmath>

#include "framework/check.h"
#include "framework/cpu/column_blocks.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

void CpuBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                 int64_t N, int64_t C, float eps) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_forward with N=" << N << " C=" << C);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < C; c++) sq += static_cast<double>(x[c]) * x[c];
    const float rs =
        static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(C) + static_cast<double>(eps)));
    float* y = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = rmsnorm_output(x[c], rs, weight[c]);
    rstd[n] = rs;
  }
}

void CpuBackend::rmsnorm_backward_input(float* dinp, const float* dout, const float* inp,
                                        const float* weight, const float* rstd, int64_t N,
                                        int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_input with N=" << N << " C=" << C);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const float rs = rstd[n];
    double s_dxhat_xhat = 0.0;
#pragma omp simd reduction(+ : s_dxhat_xhat)
    for (int64_t c = 0; c < C; c++) s_dxhat_xhat += (dy[c] * weight[c]) * (x[c] * rs);
    const float mean_dxhat_xhat = static_cast<float>(s_dxhat_xhat / static_cast<double>(C));
    float* dx = dinp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++)
      dx[c] += rmsnorm_dinp(dy[c] * weight[c], x[c] * rs, rs, mean_dxhat_xhat);
  }
}

void CpuBackend::rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                         const float* rstd, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_weight with N=" << N << " C=" << C);
  for_each_column_block(C, threads_, [&](int64_t c0, int64_t width) {
    double acc[kColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const float* x = inp + n * C + c0;
      const float* dy = dout + n * C + c0;
      const float rs = rstd[n];
#pragma omp simd
      for (int64_t c = 0; c < width; c++) acc[c] += dy[c] * (x[c] * rs);
    }
    add_column_sums(dweight + c0, acc, width);
  });
}

}  // namespace gpt::cpu
