// LayerNorm and RMSNorm on the CPU (RMSNorm is the Llama family's norm, also each head's q and k
// norm in Qwen3): forward keeping the row statistics, the input gradient accumulated into the
// residual stream's gradient, and the weight (and bias) gradients. One row loop serves both:
// RMSNorm is LayerNorm without the mean and the bias (kCentered false), each norm keeping its own
// formulas (elementwise.h). Row statistics are summed in double so long rows keep their precision;
// the weight gradients are column sums over rows split by blocks of columns, so they do not depend
// on the thread count.
#include <cmath>

#include "framework/check.h"
#include "framework/cpu/column_blocks.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {
namespace {

// out = the normalised rows of inp (N,C) times weight (plus bias when kCentered); rstd (N), and
// mean (N) when kCentered, kept for the backward.
template <bool kCentered>
void norm_forward(int threads, float* out, float* mean, float* rstd, const float* inp,
                  const float* weight, const float* bias, int64_t N, int64_t C, double eps) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    double m = 0.0;
    if constexpr (kCentered) {
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; c++) s += x[c];
      m = s / static_cast<double>(C);
    }
    // Two passes (mean, then squared deviations) avoid E[x^2]-E[x]^2 cancellation.
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < C; c++) {
      const double d = x[c] - m;
      sq += d * d;
    }
    const float mf = static_cast<float>(m);
    const float rs = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(C) + eps));
    float* y = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++)
      y[c] = norm_output<kCentered>(x[c], mf, rs, weight[c], kCentered ? bias[c] : 0.0f);
    if constexpr (kCentered) mean[n] = mf;
    rstd[n] = rs;
  }
}

// dinp (N,C) += the input gradient. Without centring, mean is null and the mean of dxhat is not
// part of the gradient.
template <bool kCentered>
void norm_backward_input(int threads, float* dinp, const float* dout, const float* inp,
                         const float* weight, const float* mean, const float* rstd, int64_t N,
                         int64_t C) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const float m = kCentered ? mean[n] : 0.0f;
    const float rs = rstd[n];
    double s_dxhat = 0.0;
    double s_dxhat_xhat = 0.0;
#pragma omp simd reduction(+ : s_dxhat, s_dxhat_xhat)
    for (int64_t c = 0; c < C; c++) {
      const float xhat = layernorm_xhat(x[c], m, rs);
      const float dxhat = layernorm_dxhat(dy[c], weight[c]);
      if constexpr (kCentered) s_dxhat += dxhat;
      s_dxhat_xhat += dxhat * xhat;
    }
    const float mean_dxhat = static_cast<float>(s_dxhat / static_cast<double>(C));
    const float mean_dxhat_xhat = static_cast<float>(s_dxhat_xhat / static_cast<double>(C));
    float* dx = dinp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) {
      const float xhat = layernorm_xhat(x[c], m, rs);
      const float dxhat = layernorm_dxhat(dy[c], weight[c]);
      dx[c] += norm_dinp<kCentered>(dxhat, xhat, rs, mean_dxhat, mean_dxhat_xhat);
    }
  }
}

// dweight (C) += sum_n dout * xhat, and dbias (C) += sum_n dout when kCentered.
template <bool kCentered>
void norm_backward_weight(int threads, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* mean, const float* rstd, int64_t N,
                          int64_t C) {
  for_each_column_block(C, threads, [&](int64_t c0, int64_t width) {
    double acc_w[kColumnBlock] = {};
    double acc_b[kColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const float* x = inp + n * C + c0;
      const float* dy = dout + n * C + c0;
      const float m = kCentered ? mean[n] : 0.0f;
      const float rs = rstd[n];
#pragma omp simd
      for (int64_t c = 0; c < width; c++) {
        acc_w[c] += dy[c] * layernorm_xhat(x[c], m, rs);
        if constexpr (kCentered) acc_b[c] += dy[c];
      }
    }
    add_column_sums(dweight + c0, acc_w, width);
    if constexpr (kCentered) add_column_sums(dbias + c0, acc_b, width);
  });
}

}  // namespace

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_forward with N=" << N << " C=" << C);
  norm_forward<true>(threads_, out, mean, rstd, inp, weight, bias, N, C, kLayerNormEps);
}

void CpuBackend::layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                                          const float* weight, const float* mean, const float* rstd,
                                          int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_input with N=" << N << " C=" << C);
  norm_backward_input<true>(threads_, dinp, dout, inp, weight, mean, rstd, N, C);
}

void CpuBackend::layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                           const float* inp, const float* mean, const float* rstd,
                                           int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_weight with N=" << N << " C=" << C);
  norm_backward_weight<true>(threads_, dweight, dbias, dout, inp, mean, rstd, N, C);
}

void CpuBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                 int64_t N, int64_t C, float eps) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_forward with N=" << N << " C=" << C);
  norm_forward<false>(threads_, out, nullptr, rstd, inp, weight, nullptr, N, C, eps);
}

void CpuBackend::rmsnorm_backward_input(float* dinp, const float* dout, const float* inp,
                                        const float* weight, const float* rstd, int64_t N,
                                        int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_input with N=" << N << " C=" << C);
  norm_backward_input<false>(threads_, dinp, dout, inp, weight, nullptr, rstd, N, C);
}

void CpuBackend::rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                         const float* rstd, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_weight with N=" << N << " C=" << C);
  norm_backward_weight<false>(threads_, dweight, nullptr, dout, inp, nullptr, rstd, N, C);
}

}  // namespace gpt::cpu
