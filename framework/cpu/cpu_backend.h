// The CPU backend: the reference implementation of the kernel interface. Matrix products go
// through oneDNN's sgemm; everything else is OpenMP loops written for the compiler to vectorise.
// Kernels are split over files by op family (matmul.cpp, layernorm.cpp, ...); this class only
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

  void matmul_forward(float* out, const float* inp, WeightOperand weight, const float* bias,
                      int64_t N, int64_t IC, int64_t OC) override;
  void matmul_backward_input(float* dinp, const float* dout, WeightOperand weight, int64_t N,
                             int64_t IC, int64_t OC, bool accumulate) override;
  void matmul_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp,
                              int64_t N, int64_t IC, int64_t OC) override;
  void matmul_forward_rows(float* out, const float* inp, const float* weight, const float* bias,
                           int64_t R, int64_t IC, int64_t OC) override;

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int64_t N, int64_t C) override;
  void layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                                const float* weight, const float* mean, const float* rstd,
                                int64_t N, int64_t C) override;
  void layernorm_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* mean, const float* rstd, int64_t N,
                                 int64_t C) override;

  void gelu_forward(float* out, const float* inp, int64_t n) override;
  void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) override;

  using Backend::attention_backward;  // the fused-qkv forms
  using Backend::attention_forward;
  void attention_forward(float* out, float* att, const float* q, const float* k, const float* v,
                         const AttentionShape& s) override;
  void attention_backward(float* dq, float* dk, float* dv, float* datt, const float* dout,
                          const float* out, const float* q, const float* k, const float* v,
                          const float* att, const AttentionShape& s) override;
  void paged_kv_store(float* k_pool, float* v_pool, const float* k, const float* v,
                      const AttentionShape& s, const int32_t* slots) override;
  void paged_attention_decode(float* out, float* scores, const float* q, const float* k_pool,
                              const float* v_pool, const AttentionShape& s,
                              const int32_t* block_tables, int64_t max_blocks,
                              const int32_t* lengths) override;

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                       int64_t C, float eps) override;
  void rmsnorm_backward_input(float* dinp, const float* dout, const float* inp, const float* weight,
                              const float* rstd, int64_t N, int64_t C) override;
  void rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                               const float* rstd, int64_t N, int64_t C) override;
  void rotary_forward(float* x, const float* table, int64_t B, int64_t T, int64_t heads, int64_t HS,
                      int64_t start) override;
  void rotary_backward(float* dx, const float* table, int64_t B, int64_t T, int64_t heads,
                       int64_t HS, int64_t start) override;
  void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) override;
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, int64_t n) override;

  void round_to_bf16(float* x, int64_t n) override;
  void pack_bf16(uint16_t* out, const float* inp, int64_t n) override;
  void unpack_bf16(float* out, const uint16_t* inp, int64_t n) override;
  void accumulate(float* y, const float* x, int64_t n) override;
  void scale(float* x, float factor, int64_t n) override;
  void add_bias(float* out, const float* bias, int64_t N, int64_t C) override;
  void bias_backward(float* dbias, const float* dout, int64_t N, int64_t C) override;

  void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C,
                         int64_t vocab_start, int64_t V_local) override;
  void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                          int64_t C, int64_t vocab_start, int64_t V_local) override;
  void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                  int64_t C) override;
  void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                   int64_t C) override;

  void xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V_local,
                    int64_t V_valid) override;
  void xent_row_sumexp(float* row_sumexp, const float* logits, const float* row_max, int64_t N,
                       int64_t V_local, int64_t V_valid) override;
  void xent_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                         int64_t N, int64_t V_local, int64_t vocab_start) override;
  void xent_loss(float* losses, const float* row_max, const float* row_sumexp,
                 const float* target_logit, int64_t N) override;
  void xent_backward(float* logits, const float* row_max, const float* row_sumexp,
                     const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid,
                     int64_t vocab_start, float loss_scale) override;

  double sum(const float* x, int64_t n) override;
  double sum_squares(const float* x, int64_t n) override;

  void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                    std::span<const ParameterRun> runs, const AdamWStep& decayed,
                    const AdamWStep& undecayed) override;
  void sgd_update(float* param, const float* grad, float* momentum_buffer,
                  std::span<const ParameterRun> runs, const SgdStep& decayed,
                  const SgdStep& undecayed) override;

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
