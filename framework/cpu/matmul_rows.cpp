// The batch-invariant product of generation and serving on the CPU (Backend::matmul_forward_rows).
// Written by hand because oneDNN's sgemm chooses its blocking, and with it each output's order of
// summation, by the shape: the same row multiplied alone or among 63 others can differ in the
// last bit, and a server's token would then depend on which requests shared its step. Here every
// output element is one dot product in a fixed order (fixed_order_dot); threads split the output
// columns and rows, never a dot product.
#include <algorithm>
#include <cstring>

#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {

constexpr int kLanes = 16;
// Tiles: a block of weight rows stays in cache while a block of input rows passes over it.
constexpr int64_t kOutputBlock = 16;
constexpr int64_t kRowBlock = 32;

// 16 floats as one value: GCC's vector extension, lowered to the machine's widest registers
// (one AVX-512 register, two AVX2 ones), so the lanes are vectorised whatever the optimiser does.
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// out[i] = the dot products of NR input rows a[i] with one weight row w, each in the same fixed
// order: two accumulators of 16 lanes (two independent chains of multiply-adds keep the units
// busy), accumulator c, lane j summing the products k = 16 c + j, 16 c + j + 32, ... in order;
// the tail (n mod 32) goes to the first accumulator's lanes; then the 32 partial sums are added
// pairwise. NR rows share each load of the weights; every row's own operations are those it
// would get alone, so grouping rows changes no bit. No function takes or returns a Lanes: that
// would change the calling convention with the register width (GCC's -Wpsabi), and memcpy into
// locals compiles to plain vector loads.
template <int NR>
void fixed_order_dots(float* out, const float* const* a, const float* w, int64_t n) {
  Lanes first[NR] = {}, second[NR] = {};
  Lanes w0, w1, x0, x1;
  int64_t k = 0;
  for (; k + 2 * kLanes <= n; k += 2 * kLanes) {
    std::memcpy(&w0, w + k, sizeof(Lanes));
    std::memcpy(&w1, w + k + kLanes, sizeof(Lanes));
    for (int i = 0; i < NR; i++) {
      std::memcpy(&x0, a[i] + k, sizeof(Lanes));
      std::memcpy(&x1, a[i] + k + kLanes, sizeof(Lanes));
      first[i] += x0 * w0;
      second[i] += x1 * w1;
    }
  }
  for (int i = 0; i < NR; i++) {
    float lane[2 * kLanes];
    std::memcpy(lane, &first[i], sizeof(Lanes));
    std::memcpy(lane + kLanes, &second[i], sizeof(Lanes));
    for (int j = 0; k + j < n; j++) lane[j % kLanes] += a[i][k + j] * w[k + j];
    for (int width = kLanes; width >= 1; width /= 2)
      for (int j = 0; j < width; j++) lane[j] += lane[j + width];
    out[i] = lane[0];
  }
}

}  // namespace

void CpuBackend::matmul_forward_rows(float* out, const float* inp, const float* weight,
                                     const float* bias, int64_t R, int64_t IC, int64_t OC) {
  GPT_CHECK(R >= 0 && IC > 0 && OC > 0,
            "matmul_forward_rows with R=" << R << " IC=" << IC << " OC=" << OC);
  const int64_t output_blocks = (OC + kOutputBlock - 1) / kOutputBlock;
  const int64_t row_blocks = (R + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads_)
  for (int64_t ob = 0; ob < output_blocks; ob++)
    for (int64_t rb = 0; rb < row_blocks; rb++) {
      const int64_t o1 = std::min(OC, (ob + 1) * kOutputBlock);
      const int64_t r1 = std::min(R, (rb + 1) * kRowBlock);
      for (int64_t o = ob * kOutputBlock; o < o1; o++) {
        const float* w = weight + o * IC;
        const float add = bias != nullptr ? bias[o] : 0.0f;
        // Four rows at a time share the weights' loads; the rest one by one.
        int64_t r = rb * kRowBlock;
        for (; r + 4 <= r1; r += 4) {
          const float* rows[4] = {inp + r * IC, inp + (r + 1) * IC, inp + (r + 2) * IC,
                                  inp + (r + 3) * IC};
          float dots[4];
          fixed_order_dots<4>(dots, rows, w, IC);
          for (int i = 0; i < 4; i++) out[(r + i) * OC + o] = dots[i] + add;
        }
        for (; r < r1; r++) {
          const float* row = inp + r * IC;
          float dot = 0.0f;
          fixed_order_dots<1>(&dot, &row, w, IC);
          out[r * OC + o] = dot + add;
        }
      }
    }
}

}  // namespace gpt::cpu
