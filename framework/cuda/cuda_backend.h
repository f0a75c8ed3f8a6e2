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

  using Backend::attention_backward;  // the fused-qkv forms
  using Backend::attention_forward;
  // Every kernel of the interface (framework/backend_kernels.inc).
#define GPT_BACKEND_KERNEL(...) __VA_ARGS__ override;
#include "framework/backend_kernels.inc"
#undef GPT_BACKEND_KERNEL

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
