// The CPU backend's bf16 precision: bf16 storage of the residual stream (round_to_bf16, and the
// 16-bit pipeline messages' packing), and float32 copies of product operands rounded to bfloat16
// (to nearest even, as the GPU's conversion). A float32 product of two bf16 values is exact, so
// sgemm over the copies is a bf16 product accumulated in float32, the CUDA backend's bf16 regime.
// A weight with a compute copy (ParameterStore's bf16 values) is widened from it instead: the same
// float32 values, from the copy the CUDA backend's products read directly.
// The copies live in two growing operand buffers that the trainer reserves at the memory model's
// size (parallel/memory_model.cpp: device_scratch).
#include "framework/bf16.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

const float* round_rows_to_bf16(float* dst, const float* src, int64_t rows, int64_t cols,
                                int64_t src_stride) {
  if (src_stride == cols) {  // packed already: one flat loop, split evenly over the threads
    const int64_t n = rows * cols;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = round_to_bf16(src[i]);
    return dst;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float* in = src + r * src_stride;
    float* out = dst + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; c++) out[c] = round_to_bf16(in[c]);
  }
  return dst;
}

const float* CpuBackend::bf16_operand(GrowingBuffer& buffer, const float* x, int64_t n) {
  if (precision_ != Precision::kBf16) return x;
  float* copy = static_cast<float*>(buffer.get(*this, sizeof(float) * static_cast<size_t>(n)));
  return round_rows_to_bf16(copy, x, 1, n, n);
}

const float* CpuBackend::weight_operand(const WeightOperand& weight, int64_t n) {
  if (precision_ != Precision::kBf16 || weight.bf16 == nullptr)
    return bf16_operand(operand_b_, weight.values, n);
  float* copy = static_cast<float*>(operand_b_.get(*this, sizeof(float) * static_cast<size_t>(n)));
  unpack_bf16(copy, weight.bf16, n);
  return copy;
}

void CpuBackend::round_to_bf16(float* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] = gpt::round_to_bf16(x[i]);
}

void CpuBackend::pack_bf16(uint16_t* out, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = float_to_bf16(inp[i]);
}

void CpuBackend::unpack_bf16(float* out, const uint16_t* inp, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = bf16_to_float(inp[i]);
}

void CpuBackend::reserve_scratch(const DeviceScratch& scratch) {
  operand_a_.get(*this, static_cast<size_t>(scratch.operand_a));
  operand_b_.get(*this, static_cast<size_t>(scratch.operand_b));
}

}  // namespace gpt::cpu
