// LayerNorm on the CPU: forward (keeping mean and rstd per row), input gradient (accumulated into
// the residual stream's gradient) and the weight/bias gradients. Row statistics are summed in
// double so long rows keep their precision; the weight gradients are column sums over rows split
// by blocks of columns, so they do not depend on the thread count.
#include <cmath>

#include "framework/check.h"
#include "framework/cpu/column_blocks.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_forward with N=" << N << " C=" << C);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; c++) s += x[c];
    const double m = s / static_cast<double>(C);
    // Two passes (mean, then squared deviations) avoid E[x^2]-E[x]^2 cancellation.
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < C; c++) {
      const double d = x[c] - m;
      sq += d * d;
    }
    const double var = sq / static_cast<double>(C);
    const float mf = static_cast<float>(m);
    const float rs = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(kLayerNormEps)));
    float* y = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = layernorm_output(x[c], mf, rs, weight[c], bias[c]);
    mean[n] = mf;
    rstd[n] = rs;
  }
}

void CpuBackend::layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                                          const float* weight, const float* mean, const float* rstd,
                                          int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_input with N=" << N << " C=" << C);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const float m = mean[n];
    const float rs = rstd[n];
    double s_dxhat = 0.0;
    double s_dxhat_xhat = 0.0;
#pragma omp simd reduction(+ : s_dxhat, s_dxhat_xhat)
    for (int64_t c = 0; c < C; c++) {
      const float xhat = layernorm_xhat(x[c], m, rs);
      const float dxhat = layernorm_dxhat(dy[c], weight[c]);
      s_dxhat += dxhat;
      s_dxhat_xhat += dxhat * xhat;
    }
    const float mean_dxhat = static_cast<float>(s_dxhat / static_cast<double>(C));
    const float mean_dxhat_xhat = static_cast<float>(s_dxhat_xhat / static_cast<double>(C));
    float* dx = dinp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) {
      const float xhat = layernorm_xhat(x[c], m, rs);
      const float dxhat = layernorm_dxhat(dy[c], weight[c]);
      dx[c] += layernorm_dinp(dxhat, xhat, rs, mean_dxhat, mean_dxhat_xhat);
    }
  }
}

void CpuBackend::layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                           const float* inp, const float* mean, const float* rstd,
                                           int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_weight with N=" << N << " C=" << C);
  for_each_column_block(C, threads_, [&](int64_t c0, int64_t width) {
    double acc_w[kColumnBlock] = {};
    double acc_b[kColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const float* x = inp + n * C + c0;
      const float* dy = dout + n * C + c0;
      const float m = mean[n];
      const float rs = rstd[n];
#pragma omp simd
      for (int64_t c = 0; c < width; c++) {
        acc_w[c] += dy[c] * layernorm_xhat(x[c], m, rs);
        acc_b[c] += dy[c];
      }
    }
    add_column_sums(dweight + c0, acc_w, width);
    add_column_sums(dbias + c0, acc_b, width);
  });
}

}  // namespace gpt::cpu
