// Vocabulary-parallel softmax cross-entropy on the CUDA backend, in the pieces of backend.h: row
// max, row sum of exponentials, target logit, loss, in-place backward. Padding columns
// (j >= V_valid) act as -inf logits: outside the max and the sum, gradient 0, as on the CPU.
#include <cmath>
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/block_reduce.cuh"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

constexpr int kRowThreads = 512;  // one block per row of up to ~50k columns
constexpr int kThreads = 256;     // one thread per row in the per-row scalar kernels

unsigned blocks_for(int64_t N) {
  return static_cast<unsigned>((N + kThreads - 1) / kThreads);
}

// -inf when this rank holds only padding (V_valid <= 0): the identity of the max all-reduce.
__global__ void row_max_kernel(float* row_max, const float* logits, int64_t V_local,
                               int64_t V_valid) {
  const float* row = logits + blockIdx.x * V_local;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < V_valid; j += kRowThreads) m = row[j] > m ? row[j] : m;
  m = block_reduce<kRowThreads>(m, MaxOp{});
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

// Double accumulation, as on the CPU: a 50k-column row summed in float would lose digits.
__global__ void row_sumexp_kernel(float* row_sumexp, const float* logits, const float* row_max,
                                  int64_t V_local, int64_t V_valid) {
  const float* row = logits + blockIdx.x * V_local;
  const float m = row_max[blockIdx.x];
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < V_valid; j += kRowThreads) s += fast_expf(row[j] - m);
  s = block_reduce<kRowThreads>(s, SumOp{});
  if (threadIdx.x == 0) row_sumexp[blockIdx.x] = static_cast<float>(s);
}

__global__ void target_logit_kernel(float* target_logit, const float* logits,
                                    const int32_t* targets, int64_t N, int64_t V_local,
                                    int64_t vocab_start) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int64_t j = targets[n] - vocab_start;
  target_logit[n] = (j >= 0 && j < V_local) ? logits[n * V_local + j] : 0.0f;
}

__global__ void loss_kernel(float* losses, const float* row_max, const float* row_sumexp,
                            const float* target_logit, int64_t N) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  losses[n] = logf(row_sumexp[n]) + row_max[n] - target_logit[n];
}

__global__ void backward_kernel(float* logits, const float* row_max, const float* row_sumexp,
                                const int32_t* targets, int64_t V_local, int64_t V_valid,
                                int64_t vocab_start, float loss_scale) {
  float* row = logits + blockIdx.x * V_local;
  const float m = row_max[blockIdx.x];
  // The scaled reciprocal once per row, as the CPU does, instead of a division per element.
  const float scale_over_sum = loss_scale / row_sumexp[blockIdx.x];
  const int64_t t = targets[blockIdx.x] - vocab_start;
  for (int64_t j = threadIdx.x; j < V_local; j += kRowThreads) {
    float g = 0.0f;
    if (j < V_valid) {
      // __fmul_rn keeps the product rounded before the target's subtraction (no fused FMA),
      // the CPU's two steps.
      g = __fmul_rn(fast_expf(row[j] - m), scale_over_sum);
      if (j == t) g -= loss_scale;
    }
    row[j] = g;
  }
}

}  // namespace

void xent_row_max(cudaStream_t stream, float* row_max, const float* logits, int64_t N,
                  int64_t V_local, int64_t V_valid) {
  GPT_CHECK(N >= 0 && N <= INT32_MAX && V_valid >= 0 && V_valid <= V_local,
            "xent_row_max with N=" << N << " V_local=" << V_local << " V_valid=" << V_valid);
  if (N == 0) return;
  row_max_kernel<<<static_cast<unsigned>(N), kRowThreads, 0, stream>>>(row_max, logits, V_local,
                                                                       V_valid);
  GPT_CUDA_CHECK_LAUNCH();
}

void xent_row_sumexp(cudaStream_t stream, float* row_sumexp, const float* logits,
                     const float* row_max, int64_t N, int64_t V_local, int64_t V_valid) {
  GPT_CHECK(N >= 0 && N <= INT32_MAX && V_valid >= 0 && V_valid <= V_local,
            "xent_row_sumexp with N=" << N << " V_local=" << V_local << " V_valid=" << V_valid);
  if (N == 0) return;
  row_sumexp_kernel<<<static_cast<unsigned>(N), kRowThreads, 0, stream>>>(
      row_sumexp, logits, row_max, V_local, V_valid);
  GPT_CUDA_CHECK_LAUNCH();
}

void xent_target_logit(cudaStream_t stream, float* target_logit, const float* logits,
                       const int32_t* targets, int64_t N, int64_t V_local, int64_t vocab_start) {
  GPT_CHECK(N >= 0 && V_local >= 0, "xent_target_logit with N=" << N << " V_local=" << V_local);
  if (N == 0) return;
  target_logit_kernel<<<blocks_for(N), kThreads, 0, stream>>>(target_logit, logits, targets, N,
                                                              V_local, vocab_start);
  GPT_CUDA_CHECK_LAUNCH();
}

void xent_loss(cudaStream_t stream, float* losses, const float* row_max, const float* row_sumexp,
               const float* target_logit, int64_t N) {
  if (N <= 0) return;
  loss_kernel<<<blocks_for(N), kThreads, 0, stream>>>(losses, row_max, row_sumexp, target_logit, N);
  GPT_CUDA_CHECK_LAUNCH();
}

void xent_backward(cudaStream_t stream, float* logits, const float* row_max,
                   const float* row_sumexp, const int32_t* targets, int64_t N, int64_t V_local,
                   int64_t V_valid, int64_t vocab_start, float loss_scale) {
  GPT_CHECK(N >= 0 && N <= INT32_MAX && V_valid >= 0 && V_valid <= V_local,
            "xent_backward with N=" << N << " V_local=" << V_local << " V_valid=" << V_valid);
  if (N == 0 || V_local == 0) return;
  backward_kernel<<<static_cast<unsigned>(N), kRowThreads, 0, stream>>>(
      logits, row_max, row_sumexp, targets, V_local, V_valid, vocab_start, loss_scale);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
