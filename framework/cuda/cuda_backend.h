// The CUDA backend: the kernel interface on one GPU. Matrix products through cuBLASLt
// (matmul.cpp), everything else through the own kernels of kernels.h, all enqueued on one compute
// stream; device memory from one arena reserved at start-up. Communicators (NCCL, host-staged
// MPI) order their own streams against compute_stream() with events.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "framework/backend.h"
#include "framework/cuda/device_arena.h"
#include "framework/cuda/kernels.h"
#include "framework/gemm_layout.h"
#include "framework/growing_buffer.h"

namespace gpt::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string name() const override;
  Precision precision() const override { return options_.precision; }
  cudaStream_t compute_stream() const { return stream_; }
  int device() const { return options_.device; }
  const DeviceArena& arena() const { return arena_; }

  static constexpr size_t kGemmWorkspaceBytes = kCudaGemmWorkspaceBytes;

  size_t allocation_granularity() const override { return DeviceArena::kAlignment; }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(float* x, int64_t n) override;
  void synchronize() override;
  bool is_device_memory(const void* ptr) const override { return arena_.contains(ptr); }
  void reserve_scratch(const DeviceScratch& scratch) override;

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
  // One cuBLASLt product (gemm_layout.h) D = op(A) op(B) + beta D, A and B float32 in memory
  // (rounded to bf16 first in bf16 precision, unless a_bf16, A's compute copy, is given), D
  // float32; bias (m) fused when not null.
  void gemm(const GemmShape& shape, const float* A, const float* B, float* D, float beta,
            const float* bias, const uint16_t* a_bf16 = nullptr);
  // The descriptors and the algorithm of one product: shape, pointer alignments and the bias
  // epilogue (with its pointer's alignment).
  // Built and chosen once, so every later call of the shape runs the same kernel
  // (--deterministic relies on it) without rebuilding descriptors. Defined in matmul.cpp.
  struct GemmPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algorithm{};
    GemmPlan() = default;
    GemmPlan(const GemmPlan&) = delete;
    GemmPlan& operator=(const GemmPlan&) = delete;
    ~GemmPlan();
  };
  // Null when cuBLASLt has no algorithm for the product (remembered too).
  const GemmPlan* plan_for(const GemmShape& shape, const float* bias, const void* A, const void* B,
                           const void* D);
  const UpdateBlock* update_blocks(std::span<const ParameterRun> runs, int64_t* n_blocks);
  double reduce_to_host(bool squares, const float* x, int64_t n);

  CudaBackendOptions options_;
  DeviceArena arena_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* gemm_workspace_ = nullptr;
  GrowingBuffer scratch_, operand_a_, operand_b_, update_table_;
  double* device_result_ = nullptr;  // one double in the arena for sum() and sum_squares()
  double* host_result_ = nullptr;    // pinned, so its copy is a true asynchronous transfer
  using GemmKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                             int, int, int, int>;
  std::map<GemmKey, std::unique_ptr<GemmPlan>> plans_;
  std::vector<ParameterRun> table_runs_;  // the runs update_table_ was built for
  int64_t table_blocks_ = 0;
};

}  // namespace gpt::cuda
