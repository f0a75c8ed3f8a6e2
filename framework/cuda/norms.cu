// LayerNorm and RMSNorm on the CUDA backend (RMSNorm is the Llama family's norm): forward keeping
// the row statistics, the accumulated input gradient, and the weight (and bias) gradients as
// deterministic column sums. One kernel of each kind serves both, RMSNorm being LayerNorm without
// the mean and the bias (kCentered false), as on the CPU (framework/cpu/norms.cpp): a warp per
// row, row statistics summed in double in the CPU's two-pass way and the CPU's products, so both
// backends agree to float rounding; column sums over a fixed number of row chunks.
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

// out = the normalised rows of inp (N,C) times weight (plus bias when kCentered); rstd (N), and
// mean (N) when kCentered, kept for the backward.
template <bool kCentered>
__global__ void norm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int64_t N, int64_t C,
                                    double eps) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = warp_row();
  if (n >= N) return;  // the whole warp leaves together
  const float* x = inp + n * C;
  double m = 0.0;
  if constexpr (kCentered) {
    double s = 0.0;
    for (int64_t c = lane; c < C; c += 32) s += x[c];
    m = warp_sum(s) / static_cast<double>(C);
  }
  // Two passes (mean, then squared deviations) avoid E[x^2]-E[x]^2 cancellation.
  double sq = 0.0;
  for (int64_t c = lane; c < C; c += 32) {
    const double d = x[c] - m;
    sq += d * d;
  }
  const float mf = static_cast<float>(m);
  const float rs = static_cast<float>(1.0 / sqrt(warp_sum(sq) / static_cast<double>(C) + eps));
  float* y = out + n * C;
  for (int64_t c = lane; c < C; c += 32)
    y[c] = norm_output<kCentered>(x[c], mf, rs, weight[c], kCentered ? bias[c] : 0.0f);
  if (lane == 0) {
    if constexpr (kCentered) mean[n] = mf;
    rstd[n] = rs;
  }
}

// dinp (N,C) += the input gradient; without centring mean is null and the mean of dxhat is not
// part of the gradient.
template <bool kCentered>
__global__ void norm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                           const float* weight, const float* mean,
                                           const float* rstd, int64_t N, int64_t C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = warp_row();
  if (n >= N) return;
  const float* x = inp + n * C;
  const float* dy = dout + n * C;
  const float m = kCentered ? mean[n] : 0.0f;
  const float rs = rstd[n];
  double s_dxhat = 0.0;
  double s_dxhat_xhat = 0.0;
  for (int64_t c = lane; c < C; c += 32) {
    const float xhat = layernorm_xhat(x[c], m, rs);
    const float dxhat = layernorm_dxhat(dy[c], weight[c]);
    if constexpr (kCentered) s_dxhat += dxhat;
    s_dxhat_xhat += dxhat * xhat;  // float product, as on the CPU
  }
  float mean_dxhat = 0.0f;
  if constexpr (kCentered)
    mean_dxhat = static_cast<float>(warp_sum(s_dxhat) / static_cast<double>(C));
  const float mean_dxhat_xhat = static_cast<float>(warp_sum(s_dxhat_xhat) / static_cast<double>(C));
  float* dx = dinp + n * C;
  for (int64_t c = lane; c < C; c += 32) {
    const float xhat = layernorm_xhat(x[c], m, rs);
    const float dxhat = layernorm_dxhat(dy[c], weight[c]);
    dx[c] += norm_dinp<kCentered>(dxhat, xhat, rs, mean_dxhat, mean_dxhat_xhat);
  }
}

// The first half of a column sum (reductions.cu) of dout * xhat, and of dout when kCentered:
// chunk k of the rows gives partial_w[k*C + c] (and partial_b[k*C + c]).
template <bool kCentered>
__global__ void norm_weight_partials_kernel(double* partial_w, double* partial_b, const float* dout,
                                            const float* inp, const float* mean, const float* rstd,
                                            int64_t N, int64_t C) {
  const int64_t c = column_index();
  if (c >= C) return;
  const RowChunk rows = row_chunk(N);
  double acc_w = 0.0;
  double acc_b = 0.0;
  for (int64_t n = rows.begin; n < rows.end; n++) {
    const float dy = dout[n * C + c];
    acc_w += dy * layernorm_xhat(inp[n * C + c], kCentered ? mean[n] : 0.0f, rstd[n]);
    if constexpr (kCentered) acc_b += dy;
  }
  partial_w[blockIdx.y * C + c] = acc_w;
  if constexpr (kCentered) partial_b[blockIdx.y * C + c] = acc_b;
}

template <bool kCentered>
void norm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp,
                  const float* weight, const float* bias, int64_t N, int64_t C, double eps) {
  if (N == 0) return;
  norm_forward_kernel<kCentered><<<warp_row_blocks(N), kWarpRowThreads, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, C, eps);
  GPT_CUDA_CHECK_LAUNCH();
}

template <bool kCentered>
void norm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                         const float* weight, const float* mean, const float* rstd, int64_t N,
                         int64_t C) {
  if (N == 0) return;
  norm_backward_input_kernel<kCentered><<<warp_row_blocks(N), kWarpRowThreads, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  GPT_CUDA_CHECK_LAUNCH();
}

// dweight (C) += sum_n dout * xhat, and dbias (C) += sum_n dout when kCentered; scratch holds
// the partial sums (kColumnChunks x C doubles each).
template <bool kCentered>
void norm_backward_weight(cudaStream_t stream, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* mean, const float* rstd, int64_t N,
                          int64_t C, void* scratch) {
  if (N == 0) return;
  double* partial_w = static_cast<double*>(scratch);
  double* partial_b = kCentered ? partial_w + static_cast<int64_t>(kColumnChunks) * C : nullptr;
  const unsigned column_blocks = static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads);
  norm_weight_partials_kernel<kCentered>
      <<<dim3(column_blocks, kColumnChunks), kColumnThreads, 0, stream>>>(
          partial_w, partial_b, dout, inp, mean, rstd, N, C);
  GPT_CUDA_CHECK_LAUNCH();
  column_partials_accumulate(stream, dweight, partial_w, C);
  if (kCentered) column_partials_accumulate(stream, dbias, partial_b, C);
}

}  // namespace

void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_forward with N=" << N << " C=" << C);
  norm_forward<true>(stream, out, mean, rstd, inp, weight, bias, N, C, kLayerNormEps);
}

void layernorm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int64_t N,
                              int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_input with N=" << N << " C=" << C);
  norm_backward_input<true>(stream, dinp, dout, inp, weight, mean, rstd, N, C);
}

size_t layernorm_backward_weight_scratch_bytes(int64_t /*N*/, int64_t C) {
  return static_cast<size_t>(cuda_layernorm_weight_scratch_bytes(C));
}

void layernorm_backward_weight(cudaStream_t stream, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* mean, const float* rstd, int64_t N,
                               int64_t C, void* scratch) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_weight with N=" << N << " C=" << C);
  norm_backward_weight<true>(stream, dweight, dbias, dout, inp, mean, rstd, N, C, scratch);
}

void rmsnorm_forward(cudaStream_t stream, float* out, float* rstd, const float* inp,
                     const float* weight, int64_t N, int64_t C, float eps) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_forward with N=" << N << " C=" << C);
  norm_forward<false>(stream, out, nullptr, rstd, inp, weight, nullptr, N, C, eps);
}

void rmsnorm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                            const float* weight, const float* rstd, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_input with N=" << N << " C=" << C);
  norm_backward_input<false>(stream, dinp, dout, inp, weight, nullptr, rstd, N, C);
}

size_t rmsnorm_backward_weight_scratch_bytes(int64_t /*N*/, int64_t C) {
  return static_cast<size_t>(cuda_rmsnorm_weight_scratch_bytes(C));
}

void rmsnorm_backward_weight(cudaStream_t stream, float* dweight, const float* dout,
                             const float* inp, const float* rstd, int64_t N, int64_t C,
                             void* scratch) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_weight with N=" << N << " C=" << C);
  norm_backward_weight<false>(stream, dweight, nullptr, dout, inp, nullptr, rstd, N, C, scratch);
}

}  // namespace gpt::cuda
