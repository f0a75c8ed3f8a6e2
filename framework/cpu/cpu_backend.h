// The CPU backend: the reference implementation of the kernel interface. Matrix products go
// through oneDNN's sgemm; everything else is OpenMP loops written for the compiler to vectorise.
// Kernels are split over files by op family (matmul.cpp, norms.cpp, ...); this class only
// declares them. Memory is 64-byte aligned host memory. In bf16 precision the products read
// operands rounded to bfloat16 (float32 copies in two operand buffers, bf16_operands.cpp) and
// accumulate in float32, as the CUDA backend's bf16 products do; the rest stays float32.
#pragma once

#include "framework/backend.h"
#include "framework/growing_buffer.h"

namespace gpt::cpu {

// rows x cols of src (rows src_stride floats apart) rounded to bfloat16 values into dst, packed
// (rows cols apart); returns dst.
const float* round_rows_to_bf16(float* dst, const float* src, int64_t rows, int64_t cols,
                                int64_t src_stride);

// The q, k and v an attention call's products read, and their shape's strides.
struct AttentionOperands {
  const float* q;
  const float* k;
  const float* v;
  AttentionShape shape;
};

class CpuBackend : public Backend {
 public:
  static constexpr size_t kAlignment = 64;  // a cache line: AVX-512 loads never straddle two

  explicit CpuBackend(int threads, Precision precision = Precision::kFp32);
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string name() const override;
  Precision precision() const override { return precision_; }
  int threads() const { return threads_; }
  void reserve_scratch(const DeviceScratch& scratch) override;

  size_t allocation_granularity() const override { return kAlignment; }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(float* x, int64_t n) override;
  void synchronize() override {}

  // Every kernel of the interface (framework/backend_kernels.inc).
#define GPT_BACKEND_KERNEL(...) __VA_ARGS__ override;
#include "framework/backend_kernels.inc"
#undef GPT_BACKEND_KERNEL
  using Backend::attention_backward;  // the fused-qkv forms
  using Backend::attention_forward;

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr) override;

 private:
  // In bf16 precision: x (n floats) rounded into `buffer`; in float32, x itself.
  const float* bf16_operand(GrowingBuffer& buffer, const float* x, int64_t n);
  // A product's weight (n floats) as sgemm reads it, in operand_b_ under bf16 precision: its
  // compute copy widened back, or else its values rounded; in float32, the values.
  const float* weight_operand(const WeightOperand& weight, int64_t n);
  // In bf16 precision: rounded copies of q, k and v in operand_a_; in float32, the arguments.
  AttentionOperands bf16_attention_operands(const float* q, const float* k, const float* v,
                                            const AttentionShape& s);

  int threads_;
  Precision precision_;
  GrowingBuffer operand_a_, operand_b_;  // bf16 precision's rounded copies (see above)
};

}  // namespace gpt::cpu
