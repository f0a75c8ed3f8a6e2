// The batch-invariant product of generation and serving on the CPU (Backend::matmul_forward_rows).
// Written by hand because oneDNN's sgemm chooses its blocking, and with it each output's order of
// summation, by the shape: the same row multiplied alone or among 63 others can differ in the
// last bit, and a server's token would then depend on which requests shared its step. Here every
// output element is one dot product in a fixed order: 16 lanes, lane j summing the products k = j,
// j + 16, ... in order, then the lanes added pairwise; threads split the output columns and rows,
// never a dot product.
#include <algorithm>

#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {

constexpr int kLanes = 16;
// Tiles: a block of weight rows stays in cache while a block of input rows passes over it.
constexpr int64_t kOutputBlock = 16;
constexpr int64_t kRowBlock = 32;

float fixed_order_dot(const float* a, const float* w, int64_t n) {
  float lane[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int j = 0; j < kLanes; j++) lane[j] += a[k + j] * w[k + j];
  for (int j = 0; k + j < n; j++) lane[j] += a[k + j] * w[k + j];
  for (int width = kLanes / 2; width >= 1; width /= 2)
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
