// AdamW and SGD updates on the CUDA backend: one launch per step over a table of blocks (runs of
// parameters cut into pieces of at most kUpdateBlockElements), one CUDA block per table entry,
// applying the per-element torch.optim formulas of elementwise.h that the CPU also uses.
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;  // 32 elements per thread for a full block

__global__ void adamw_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                             const UpdateBlock* blocks, AdamWStep decayed, AdamWStep undecayed) {
  const UpdateBlock block = blocks[blockIdx.x];
  const AdamWStep s = block.weight_decay ? decayed : undecayed;
  for (int i = static_cast<int>(threadIdx.x); i < block.numel; i += kThreads) {
    const int64_t k = block.offset + i;
    adamw_element(param[k], grad[k], exp_avg[k], exp_avg_sq[k], s);
  }
}

// Without a momentum buffer (momentum 0) sgd_element never reads or writes its buffer argument.
template <bool kHasBuffer>
__global__ void sgd_kernel(float* param, const float* grad, float* momentum_buffer,
                           const UpdateBlock* blocks, SgdStep decayed, SgdStep undecayed) {
  const UpdateBlock block = blocks[blockIdx.x];
  const SgdStep s = block.weight_decay ? decayed : undecayed;
  for (int i = static_cast<int>(threadIdx.x); i < block.numel; i += kThreads) {
    const int64_t k = block.offset + i;
    if constexpr (kHasBuffer) {
      sgd_element(param[k], grad[k], momentum_buffer[k], s);
    } else {
      float unused = 0.0f;
      sgd_element(param[k], grad[k], unused, s);
    }
  }
}

}  // namespace

void adamw_update(cudaStream_t stream, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, const UpdateBlock* blocks, int64_t n_blocks,
                  const AdamWStep& decayed, const AdamWStep& undecayed) {
  GPT_CHECK(n_blocks >= 0 && n_blocks <= INT32_MAX, "adamw_update with " << n_blocks << " blocks");
  if (n_blocks == 0) return;
  adamw_kernel<<<static_cast<unsigned>(n_blocks), kThreads, 0, stream>>>(
      param, grad, exp_avg, exp_avg_sq, blocks, decayed, undecayed);
  GPT_CUDA_CHECK_LAUNCH();
}

void sgd_update(cudaStream_t stream, float* param, const float* grad, float* momentum_buffer,
                const UpdateBlock* blocks, int64_t n_blocks, const SgdStep& decayed,
                const SgdStep& undecayed) {
  GPT_CHECK(n_blocks >= 0 && n_blocks <= INT32_MAX, "sgd_update with " << n_blocks << " blocks");
  if (n_blocks == 0) return;
  if (momentum_buffer == nullptr) {
    GPT_CHECK(decayed.momentum == 0.0f && undecayed.momentum == 0.0f,
              "sgd_update with momentum " << decayed.momentum << " needs a buffer");
    sgd_kernel<false><<<static_cast<unsigned>(n_blocks), kThreads, 0, stream>>>(
        param, grad, nullptr, blocks, decayed, undecayed);
  } else {
    sgd_kernel<true><<<static_cast<unsigned>(n_blocks), kThreads, 0, stream>>>(
        param, grad, momentum_buffer, blocks, decayed, undecayed);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
