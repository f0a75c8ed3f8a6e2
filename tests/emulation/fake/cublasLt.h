// Stand-in for cuBLASLt's header in the emulated kernels of test_cuda_emulation: only what
// framework/cuda/cuda_check.h names (no kernel calls cuBLASLt).
#pragma once

typedef int cublasStatus_t;
#define CUBLAS_STATUS_SUCCESS 0
