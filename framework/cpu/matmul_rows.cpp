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

// Two accumulators of 16 lanes (two independent chains of multiply-adds keep the units busy):
// accumulator c, lane j sums the products k = 16 c + j, 16 c + j + 32, ... in order; the tail
// (n mod 32) goes to the first accumulator's lanes, then the 32 partial sums are added pairwise.
float fixed_order_dot(const float* a, const float* w, int64_t n) {
  Lanes first = {}, second = {};
  int64_t k = 0;
  // No function takes or returns a Lanes: that would change the calling convention with the
  // register width (GCC's -Wpsabi), and memcpy into locals compiles to plain vector loads.
  Lanes a0, a1, w0, w1;
  for (; k + 2 * kLanes <= n; k += 2 * kLanes) {
    std::memcpy(&a0, a + k, sizeof(Lanes));
    std::memcpy(&w0, w + k, sizeof(Lanes));
    std::memcpy(&a1, a + k + kLanes, sizeof(Lanes));
    std::memcpy(&w1, w + k + kLanes, sizeof(Lanes));
    first += a0 * w0;
    second += a1 * w1;
  }
  float lane[2 * kLanes];
  std::memcpy(lane, &first, sizeof(first));
  std::memcpy(lane + kLanes, &second, sizeof(second));
  for (int j = 0; k + j < n; j++) lane[j % kLanes] += a[k + j] * w[k + j];
  for (int width = kLanes; width >= 1; width /= 2)
    for (int j = 0; j < width; j++) lane[j] += lane[j + width];
  return lane[0];
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
      for (int64_t r = rb * kRowBlock; r < r1; r++)
        for (int64_t o = ob * kOutputBlock; o < o1; o++) {
          const float dot = fixed_order_dot(inp + r * IC, weight + o * IC, IC);
          out[r * OC + o] = bias != nullptr ? dot + bias[o] : dot;
        }
    }
}

}  // namespace gpt::cpu
