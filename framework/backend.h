// The kernel interface: every numerical operation a layer or optimizer needs, one virtual call per
// layer-level op (never per element). Two implementations: CpuBackend (framework/cpu/, oneDNN
// matrix products and OpenMP loops) and CudaBackend (framework/cuda/, cuBLASLt and own kernels).
// All pointers are in the backend's memory; sizes follow llm.c (N rows = B*T, C channels, OC/IC
// out/in features, NH heads of HS). Conventions (llm.c): parameter gradients accumulate (+=),
// activation gradients are written (=) unless the function says it accumulates; outputs come first,
// then inputs, then sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "framework/cuda_scratch.h"
#include "framework/elementwise.h"
#include "framework/memory_ledger.h"

namespace gpt {

enum class DeviceKind { kCpu, kCuda };

// What the matrix products and attention compute in. kBf16 rounds their operands to bfloat16 and
// accumulates in float32 (on both backends); activations, gradients, master weights and optimizer
// state stay float32 in memory either way.
enum class Precision { kFp32, kBf16 };

// A product's weight operand: the float32 values and, under bf16 precision, their persistent
// 16-bit compute copy (ParameterStore keeps one per parameter, refreshed once per step; null
// where there is none, and then the product rounds a copy of the values itself). Implicit from
// a plain float pointer, so a caller without a compute copy passes its weights as they are.
struct WeightOperand {
  const float* values = nullptr;
  const uint16_t* bf16 = nullptr;
  WeightOperand(const float* weight_values, const uint16_t* compute_copy = nullptr)  // NOLINT
      : values(weight_values), bf16(compute_copy) {}
};

// Consecutive parameters with the same weight decay flag: elements [offset, offset + numel) of
// the flat buffers. One optimizer update covers a list of runs (one launch on CUDA).
struct ParameterRun {
  int64_t offset = 0;
  int64_t numel = 0;
  bool weight_decay = false;
};

// The sizes of the attention cache and scratch (Backend::attention_forward / _backward) for each
// backend kind, free so that the memory model sizes them without a backend: the softmax
// probabilities (B,NH,T,T) and their gradient on the CPU; on CUDA, whose fused kernel never forms
// the T x T matrix, the rows' log-sum-exp (B,NH,T) and rowsum(dout * out) (B,NH,T).
int64_t attention_cache_floats(DeviceKind kind, int64_t B, int64_t NH, int64_t T);
int64_t attention_scratch_floats(DeviceKind kind, int64_t B, int64_t NH, int64_t T);
// Whether the attention cache grows with T*T: what selective recomputation drops.
inline bool attention_cache_is_quadratic(DeviceKind kind) {
  return kind == DeviceKind::kCpu;
}
// The CUDA backend's fixed workspace: the cuBLASLt workspace (what Hopper kernels want) and one
// reduction result, each in its own arena block.
inline constexpr size_t kCudaGemmWorkspaceBytes = size_t{32} << 20;

// One grouped-query attention call (Backend::attention_*): B sequences of T positions, NH query
// heads and NKV key/value heads of HS floats (NKV divides NH; query head h reads kv head
// h / (NH / NKV)); rows of q are q_stride floats apart, rows of k and v kv_stride.
struct AttentionShape {
  int64_t B = 0, T = 0, NH = 0, NKV = 0, HS = 0;
  int64_t q_stride = 0, kv_stride = 0;
};
// GPT-2's fused [q | k | v] rows of 3*NH*HS floats.
inline AttentionShape fused_qkv_shape(int64_t B, int64_t T, int64_t NH, int64_t HS) {
  return {B, T, NH, NH, HS, 3 * NH * HS, 3 * NH * HS};
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual Precision precision() const { return Precision::kFp32; }

  // ---- memory. Every buffer is taken here with the category it counts in (memory_ledger.h);
  // the ledger records each block as reserved, rounded up to allocation_granularity(). Zero bytes
  // take nothing and return null.
  void* allocate(size_t bytes, MemoryCategory category);  // zero-filled
  void deallocate(void* ptr);                             // null is ignored
  const MemoryLedger& memory() const { return memory_; }
  virtual size_t allocation_granularity() const = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(float* x, int64_t n) = 0;
  virtual void synchronize() = 0;  // all issued work has finished
  // Whether ptr points into this backend's device memory (never on the CPU backend): host
  // buffers handed to a communicator take the MPI path.
  virtual bool is_device_memory(const void* /*ptr*/) const { return false; }
  // Takes the per-call scratch a run will ask for (the memory model's prediction) up front, so
  // that no buffer grows mid-run; the CPU backend's scratch is the layers' own.
  virtual void reserve_scratch(const DeviceScratch& /*scratch*/) {}

  // ---- the kernels: framework/backend_kernels.inc lists them, each with what it computes.
#define GPT_BACKEND_KERNEL(...) virtual __VA_ARGS__ = 0;
#include "framework/backend_kernels.inc"
#undef GPT_BACKEND_KERNEL

  // The attention cache and scratch a call takes (attention_forward and _backward), in floats.
  int64_t attention_cache_floats(int64_t B, int64_t NH, int64_t T) const {
    return gpt::attention_cache_floats(kind(), B, NH, T);
  }
  int64_t attention_scratch_floats(int64_t B, int64_t NH, int64_t T) const {
    return gpt::attention_scratch_floats(kind(), B, NH, T);
  }
  // GPT-2's fused c_attn output (B,T,3*NH*HS) = [q | k | v]: the attention kernels with NKV = NH,
  // q_stride = kv_stride = 3*NH*HS, k and v at offsets NH*HS and 2*NH*HS.
  void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t NH,
                         int64_t HS) {
    const int64_t C = NH * HS;
    attention_forward(out, att, qkv, qkv + C, qkv + 2 * C, fused_qkv_shape(B, T, NH, HS));
  }
  void attention_backward(float* dqkv, float* datt, const float* dout, const float* out,
                          const float* qkv, const float* att, int64_t B, int64_t T, int64_t NH,
                          int64_t HS) {
    const int64_t C = NH * HS;
    attention_backward(dqkv, dqkv + C, dqkv + 2 * C, datt, dout, out, qkv, qkv + C, qkv + 2 * C,
                       att, fused_qkv_shape(B, T, NH, HS));
  }
  // The scratch of paged_attention_decode, in floats.
  int64_t paged_attention_floats(int64_t R, int64_t NH, int64_t max_positions) const {
    return R * NH * max_positions;
  }

 protected:
  // The backend's own allocator, behind allocate/deallocate (bytes > 0, pointers non-null).
  virtual void* raw_allocate(size_t bytes) = 0;  // zero-filled
  virtual void raw_deallocate(void* ptr) = 0;

 private:
  MemoryLedger memory_;
};

// The CPU backend with `threads` OpenMP threads (0 = leave OpenMP's default).
std::unique_ptr<Backend> make_cpu_backend(int threads, Precision precision = Precision::kFp32);

// The CUDA backend (framework/cuda/), for builds with GPT_WITH_CUDA; elsewhere these report that
// the build has no CUDA. One rank drives one device.
struct CudaBackendOptions {
  int device = 0;
  Precision precision = Precision::kBf16;
  bool deterministic = false;  // fixed cuBLASLt algorithms without split-K reductions
  size_t arena_bytes = 0;      // device memory reserved at start-up; 0 = 90% of what is free
};
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);
// Devices this process sees (0 when the build has no CUDA or the driver finds none).
int cuda_device_count();
// Bytes of device memory free on `device` now.
size_t cuda_free_memory(int device);
// A stable identity of `device` (its UUID), to tell whether two ranks share one GPU.
std::string cuda_device_uuid(int device);

}  // namespace gpt
