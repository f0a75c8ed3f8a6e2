// RMSNorm on the CUDA backend (the Llama family's norm): forward keeping rstd per row, the
// accumulated input gradient, and the weight gradient as deterministic column sums. Laid out as
// layernorm.cu (a warp per row, row sums in double, column sums over a fixed number of row
// chunks), with the CPU's products (framework/cpu/rmsnorm.cpp), so both backends agree to float
// rounding.
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp,
                                       const float* weight, int64_t N, int64_t C, float eps) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = warp_row();
  if (n >= N) return;  // the whole warp leaves together
  const float* x = inp + n * C;
  double sq = 0.0;
  for (int64_t c = lane; c < C; c += 32) sq += static_cast<double>(x[c]) * x[c];
  const double mean_sq = warp_sum(sq) / static_cast<double>(C);
  const float rs = static_cast<float>(1.0 / sqrt(mean_sq + static_cast<double>(eps)));
  float* y = out + n * C;
  for (int64_t c = lane; c < C; c += 32) y[c] = rmsnorm_output(x[c], rs, weight[c]);
  if (lane == 0) rstd[n] = rs;
}

__global__ void rmsnorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                              const float* weight, const float* rstd, int64_t N,
                                              int64_t C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = warp_row();
  if (n >= N) return;
  const float* x = inp + n * C;
  const float* dy = dout + n * C;
  const float rs = rstd[n];
  double s_dxhat_xhat = 0.0;
  for (int64_t c = lane; c < C; c += 32) s_dxhat_xhat += (dy[c] * weight[c]) * (x[c] * rs);
  const float mean_dxhat_xhat = static_cast<float>(warp_sum(s_dxhat_xhat) / static_cast<double>(C));
  float* dx = dinp + n * C;
  for (int64_t c = lane; c < C; c += 32)
    dx[c] += rmsnorm_dinp(dy[c] * weight[c], x[c] * rs, rs, mean_dxhat_xhat);
}

// The first half of a column sum (reductions.cu) of dout * xhat: chunk k of the rows gives
// partial[k*C + c].
__global__ void rmsnorm_weight_partials_kernel(double* partial, const float* dout, const float* inp,
                                               const float* rstd, int64_t N, int64_t C) {
  const int64_t c = column_index();
  if (c >= C) return;
  const RowChunk rows = row_chunk(N);
  double acc = 0.0;
  for (int64_t n = rows.begin; n < rows.end; n++)
    acc += dout[n * C + c] * (inp[n * C + c] * rstd[n]);
  partial[blockIdx.y * C + c] = acc;
}

}  // namespace

void rmsnorm_forward(cudaStream_t stream, float* out, float* rstd, const float* inp,
                     const float* weight, int64_t N, int64_t C, float eps) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_forward with N=" << N << " C=" << C);
  if (N == 0) return;
  rmsnorm_forward_kernel<<<warp_row_blocks(N), kWarpRowThreads, 0, stream>>>(out, rstd, inp, weight,
                                                                             N, C, eps);
  GPT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                            const float* weight, const float* rstd, int64_t N, int64_t C) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_input with N=" << N << " C=" << C);
  if (N == 0) return;
  rmsnorm_backward_input_kernel<<<warp_row_blocks(N), kWarpRowThreads, 0, stream>>>(
      dinp, dout, inp, weight, rstd, N, C);
  GPT_CUDA_CHECK_LAUNCH();
}

size_t rmsnorm_backward_weight_scratch_bytes(int64_t /*N*/, int64_t C) {
  return static_cast<size_t>(cuda_rmsnorm_weight_scratch_bytes(C));
}

void rmsnorm_backward_weight(cudaStream_t stream, float* dweight, const float* dout,
                             const float* inp, const float* rstd, int64_t N, int64_t C,
                             void* scratch) {
  GPT_CHECK(N >= 0 && C > 0, "rmsnorm_backward_weight with N=" << N << " C=" << C);
  if (N == 0) return;
  double* partial = static_cast<double*>(scratch);
  const unsigned column_blocks = static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads);
  rmsnorm_weight_partials_kernel<<<dim3(column_blocks, kColumnChunks), kColumnThreads, 0, stream>>>(
      partial, dout, inp, rstd, N, C);
  GPT_CUDA_CHECK_LAUNCH();
  column_partials_accumulate(stream, dweight, partial, C);
}

}  // namespace gpt::cuda
