// One check macro per GPU library (CUDA runtime, cuBLASLt), reporting the call, file and
// line through gpt::fail; GPT_CUDA_CHECK_LAUNCH() after every kernel launch reads the launch's
// error. NCCL's macro lives with the NCCL communicator (parallel/nccl_communicator.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "framework/check.h"

namespace gpt::cuda {
std::string cublas_status_string(cublasStatus_t status);
}  // namespace gpt::cuda

#define GPT_CUDA_CHECK(call)                                                                      \
  do {                                                                                            \
    cudaError_t gpt_cuda_rc_ = (call);                                                            \
    if (gpt_cuda_rc_ != cudaSuccess)                                                              \
      ::gpt::fail(                                                                                \
          #call, __FILE__, __LINE__,                                                              \
          std::string(cudaGetErrorName(gpt_cuda_rc_)) + ": " + cudaGetErrorString(gpt_cuda_rc_)); \
  } while (0)

#define GPT_CUDA_CHECK_LAUNCH() GPT_CUDA_CHECK(cudaGetLastError())

#define GPT_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                           \
    cublasStatus_t gpt_cublas_rc_ = (call);                                                      \
    if (gpt_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::gpt::fail(#call, __FILE__, __LINE__, ::gpt::cuda::cublas_status_string(gpt_cublas_rc_)); \
  } while (0)
