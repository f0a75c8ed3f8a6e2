// Rotary positions on the CUDA backend, in place: each head's pairs (i, i + HS/2) of every row turn
// by the angles of the row's position, read from the table (cos | sin per position), with the
// per-pair formulas of elementwise.h. A thread per pair: every element is read and written by
// one thread, so the in-place update needs no ordering and the result none of the launch shape.
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/grid_stride.cuh"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

// x (B*T rows of heads*HS); pair i is (row, head, j < HS/2), j fastest, so that the threads of a
// warp read consecutive table entries and consecutive elements of a head.
template <bool kBackward>
__global__ void rotary_kernel(float* x, const float* table, int64_t T, int64_t heads, int64_t HS,
                              int64_t start, int64_t n_pairs) {
  const int64_t half = HS / 2;
  for (int64_t i = first_index(); i < n_pairs; i += grid_stride()) {
    const int64_t j = i % half, row = i / half / heads, h = i / half % heads;
    const float* cosines = table + (start + row % T) * HS;
    float* first = x + row * heads * HS + h * HS + j;
    float a = first[0], b = first[half];
    if constexpr (kBackward) {
      rotary_turn_back(a, b, cosines[j], cosines[half + j]);
    } else {
      rotary_turn(a, b, cosines[j], cosines[half + j]);
    }
    first[0] = a;
    first[half] = b;
  }
}

template <bool kBackward>
void rotate(cudaStream_t stream, float* x, const float* table, int64_t B, int64_t T, int64_t heads,
            int64_t HS, int64_t start) {
  GPT_CHECK(B >= 0 && T >= 0 && heads > 0 && HS > 0 && HS % 2 == 0 && start >= 0,
            "rotary with B=" << B << " T=" << T << " heads=" << heads << " HS=" << HS);
  const int64_t n_pairs = B * T * heads * (HS / 2);
  if (n_pairs == 0) return;
  rotary_kernel<kBackward><<<grid_for(n_pairs, kThreads), kThreads, 0, stream>>>(
      x, table, T, heads, HS, start, n_pairs);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rotary_forward(cudaStream_t stream, float* x, const float* table, int64_t B, int64_t T,
                    int64_t heads, int64_t HS, int64_t start) {
  rotate<false>(stream, x, table, B, T, heads, HS, start);
}

void rotary_backward(cudaStream_t stream, float* dx, const float* table, int64_t B, int64_t T,
                     int64_t heads, int64_t HS, int64_t start) {
  rotate<true>(stream, dx, table, B, T, heads, HS, start);
}

}  // namespace gpt::cuda
