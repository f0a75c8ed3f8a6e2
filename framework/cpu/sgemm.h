// The CPU backend's one entry to oneDNN's sgemm, with its status checked: matrix products
// (matmul.cpp) and attention's blocked products (attention.cpp) both go through it.
#pragma once

#include <cstdint>

namespace gpt::cpu {

// C (M,N) = alpha op(A) op(B) + beta C, row-major; beta 0 never reads C (BLAS semantics).
void sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace gpt::cpu
