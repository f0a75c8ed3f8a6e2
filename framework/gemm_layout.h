// The three nn.Linear products of the kernel interface as column-major GEMMs (cuBLAS's view):
// a row-major X (r, c) is the column-major X^T (c x r) with leading dimension c, so
// out (N,OC) = inp . W^T becomes D (OC x N) = op_T(W) . inp, and so on below. Kept free of CUDA
// so the CPU tests can check the shapes against the CPU backend (tests/framework).
#pragma once

#include <cstdint>

namespace gpt {

// D (m x n, column-major, leading dimension ldd) = op(A) . op(B) (+ beta D); op(A) is m x k and
// op(B) is k x n; A and B are stored column-major with leading dimensions lda and ldb.
struct GemmShape {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
};

// out (N,OC) = inp (N,IC) . weight^T:  A = weight, B = inp, D = out.
inline GemmShape linear_forward_gemm(int64_t N, int64_t IC, int64_t OC) {
  return {true, false, OC, N, IC, IC, IC, OC};
}
// dinp (N,IC) = dout (N,OC) . weight:  A = weight, B = dout, D = dinp.
inline GemmShape linear_backward_input_gemm(int64_t N, int64_t IC, int64_t OC) {
  return {false, false, IC, N, OC, IC, OC, IC};
}
// dweight (OC,IC) += dout^T . inp:  A = inp, B = dout, D = dweight (D^T in column-major terms).
inline GemmShape linear_backward_weight_gemm(int64_t N, int64_t IC, int64_t OC) {
  return {false, true, IC, OC, N, IC, OC, IC};
}

// Elements the column-major stored A and B occupy: ld times the stored column count.
inline int64_t gemm_a_elements(const GemmShape& s) { return s.lda * (s.transpose_a ? s.m : s.k); }
inline int64_t gemm_b_elements(const GemmShape& s) { return s.ldb * (s.transpose_b ? s.k : s.n); }

}  // namespace gpt
