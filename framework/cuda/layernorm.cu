// LayerNorm on the CUDA backend: forward (keeping mean and rstd), the accumulated input gradient,
// and the weight/bias gradients as deterministic column sums. Row statistics are summed in
// double, in the CPU's two-pass way, so both backends agree to float rounding.
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int64_t N,
                                         int64_t C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = warp_row();
  if (n >= N) return;  // the whole warp leaves together
  const float* x = inp + n * C;
  double s = 0.0;
  for (int64_t c = lane; c < C; c += 32) s += x[c];
  const double m = warp_sum(s) / static_cast<double>(C);
  // Two passes (mean, then squared deviations) avoid E[x^2]-E[x]^2 cancellation.
  double sq = 0.0;
  for (int64_t c = lane; c < C; c += 32) {
    const double d = x[c] - m;
    sq += d * d;
  }
  const double var = warp_sum(sq) / static_cast<double>(C);
  const float mf = static_cast<float>(m);
  const float rs = static_cast<float>(1.0 / sqrt(var + static_cast<double>(kLayerNormEps)));
  float* y = out + n * C;
  for (int64_t c = lane; c < C; c += 32) y[c] = layernorm_output(x[c], mf, rs, weight[c], bias[c]);
  if (lane == 0) {
    mean[n] = mf;
    rstd[n] = rs;
  }
}

__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, int64_t N, int64_t C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = warp_row();
  if (n >= N) return;
  const float* x = inp + n * C;
  const float* dy = dout + n * C;
  const float m = mean[n];
  const float rs = rstd[n];
  double s_dxhat = 0.0;
  double s_dxhat_xhat = 0.0;
  for (int64_t c = lane; c < C; c += 32) {
    const float xhat = layernorm_xhat(x[c], m, rs);
    const float dxhat = layernorm_dxhat(dy[c], weight[c]);
    s_dxhat += dxhat;
    s_dxhat_xhat += dxhat * xhat;  // float product, as on the CPU
  }
  const float mean_dxhat = static_cast<float>(warp_sum(s_dxhat) / static_cast<double>(C));
  const float mean_dxhat_xhat = static_cast<float>(warp_sum(s_dxhat_xhat) / static_cast<double>(C));
  float* dx = dinp + n * C;
  for (int64_t c = lane; c < C; c += 32) {
    const float xhat = layernorm_xhat(x[c], m, rs);
    const float dxhat = layernorm_dxhat(dy[c], weight[c]);
    dx[c] += layernorm_dinp(dxhat, xhat, rs, mean_dxhat, mean_dxhat_xhat);
  }
}

// Like the column sum (reductions.cu): chunk k of the rows gives partial_w[k*C + c] and
// partial_b[k*C + c]; partial_b follows partial_w in scratch.
__global__ void layernorm_weight_partials_kernel(double* partial_w, double* partial_b,
                                                 const float* dout, const float* inp,
                                                 const float* mean, const float* rstd, int64_t N,
                                                 int64_t C) {
  const int64_t c = column_index();
  if (c >= C) return;
  const RowChunk rows = row_chunk(N);
  double acc_w = 0.0;
  double acc_b = 0.0;
  for (int64_t n = rows.begin; n < rows.end; n++) {
    const float dy = dout[n * C + c];
    acc_w += dy * layernorm_xhat(inp[n * C + c], mean[n], rstd[n]);
    acc_b += dy;
  }
  partial_w[blockIdx.y * C + c] = acc_w;
  partial_b[blockIdx.y * C + c] = acc_b;
}

__global__ void layernorm_weight_finish_kernel(float* dweight, float* dbias,
                                               const double* partial_w, const double* partial_b,
                                               int64_t C) {
  const int64_t c = column_index();
  if (c >= C) return;
  dweight[c] = static_cast<float>(dweight[c] + column_partials_total(partial_w, C, c));
  dbias[c] = static_cast<float>(dbias[c] + column_partials_total(partial_b, C, c));
}

}  // namespace

void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_forward with N=" << N << " C=" << C);
  if (N == 0) return;
  layernorm_forward_kernel<<<warp_row_blocks(N), kWarpRowThreads, 0, stream>>>(out, mean, rstd, inp,
                                                                               weight, bias, N, C);
  GPT_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int64_t N,
                              int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_input with N=" << N << " C=" << C);
  if (N == 0) return;
  layernorm_backward_input_kernel<<<warp_row_blocks(N), kWarpRowThreads, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  GPT_CUDA_CHECK_LAUNCH();
}

size_t layernorm_backward_weight_scratch_bytes(int64_t /*N*/, int64_t C) {
  return static_cast<size_t>(cuda_layernorm_weight_scratch_bytes(C));
}

void layernorm_backward_weight(cudaStream_t stream, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* mean, const float* rstd, int64_t N,
                               int64_t C, void* scratch) {
  GPT_CHECK(N >= 0 && C > 0, "layernorm_backward_weight with N=" << N << " C=" << C);
  if (N == 0) return;
  double* partial_w = static_cast<double*>(scratch);
  double* partial_b = partial_w + static_cast<int64_t>(kColumnChunks) * C;
  const unsigned column_blocks = static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads);
  layernorm_weight_partials_kernel<<<dim3(column_blocks, kColumnChunks), kColumnThreads, 0,
                                     stream>>>(partial_w, partial_b, dout, inp, mean, rstd, N, C);
  GPT_CUDA_CHECK_LAUNCH();
  layernorm_weight_finish_kernel<<<column_blocks, kColumnThreads, 0, stream>>>(
      dweight, dbias, partial_w, partial_b, C);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
