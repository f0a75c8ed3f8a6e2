// A SIMT emulator that runs the CUDA kernels of framework/cuda/ on the host (test_cuda_emulation):
// every CUDA thread is a fiber, the blocks of a launch run one after another, and __syncthreads
// and warp shuffles are rendezvous points that stop the test when a block's threads diverge.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

// Function qualifiers and hints of CUDA C++ that mean nothing on the host.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)

// A type of its own rather than CUDA's CUstream_st*, so that the emulated launchers never share a
// mangled name with the real ones of a CUDA build's gpt_framework.
using cudaStream_t = struct EmulatedStream*;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
// A launch the emulator rejects stops the test at once, so every launch that returns succeeded.
inline cudaError_t cudaGetLastError() {
  return cudaSuccess;
}
inline const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorInvalidValue";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "invalid argument";
}

namespace emu {
[[noreturn]] void die(const std::string& message);
// The GPU faults on a vector load or store that is not aligned to its size; a launcher that takes
// its float4 path for a misaligned pointer must fail here too.
inline void check_vector_access(const void* p, size_t alignment) {
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) die("misaligned vector load or store");
}
}  // namespace emu

struct alignas(16) float4 {
  float x, y, z, w;
  float4() = default;
  constexpr float4(float x_, float y_, float z_, float w_) : x(x_), y(y_), z(z_), w(w_) {}
  float4(const float4& o) {
    emu::check_vector_access(&o, sizeof o);
    x = o.x, y = o.y, z = o.z, w = o.w;
  }
  float4& operator=(const float4& o) {
    emu::check_vector_access(this, sizeof o);
    x = o.x, y = o.y, z = o.z, w = o.w;
    return *this;
  }
};
inline float4 make_float4(float x, float y, float z, float w) {
  return float4(x, y, z, w);
}

struct __nv_bfloat16 {
  uint16_t bits;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(__nv_bfloat16 x_, __nv_bfloat16 y_) : x(x_), y(y_) {}
  __nv_bfloat162(const __nv_bfloat162& o) {
    emu::check_vector_access(&o, sizeof o);
    x = o.x, y = o.y;
  }
  __nv_bfloat162& operator=(const __nv_bfloat162& o) {
    emu::check_vector_access(this, sizeof o);
    x = o.x, y = o.y;
    return *this;
  }
};
// Round to nearest even, as the device's cvt.rn.bf16.f32; NaN becomes the canonical 0x7fff.
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{0x7fff};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{static_cast<uint16_t>(u >> 16)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__float2bfloat16_rn(a), __float2bfloat16_rn(b));
}
inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// A product rounded before any addition, as every host product is under -ffp-contract=off (the
// emulated kernels' build).
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace emu {

struct Coord {
  unsigned x, y, z;
};

// Where the running thread is; set by the scheduler before it switches into a thread.
inline Coord g_thread_idx{0, 0, 0}, g_block_idx{0, 0, 0}, g_block_dim{1, 1, 1}, g_grid_dim{1, 1, 1};
inline bool g_in_kernel = false;

inline const Coord& checked(const Coord& c, const char* name) {
  if (!g_in_kernel) die(std::string(name) + " read outside a kernel");
  return c;
}

// The order threads are resumed in (each round of the scheduler) and blocks are run in. Results
// of a race-free kernel do not depend on it.
enum class Order { kForward, kReverse, kRandom };
void set_order(Order order, uint32_t seed = 1);

// Runs body once per thread of the grid: blocks one at a time, the threads of a block as fibers
// switched at barriers and shuffles. Dies on shapes a GPU rejects.
void launch(dim3 grid, dim3 block, std::function<void()> body);

void syncthreads(const char* file, int line);
uint64_t shfl_xor_bits(unsigned mask, uint64_t bits, int lane_mask, const char* file, int line);

template <typename T>
T shfl_xor(unsigned mask, T value, int lane_mask, const char* file, int line) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shfl_xor_bits(mask, bits, lane_mask, file, line);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// `bytes` ending where an inaccessible page begins, never freed.
void* guarded_allocation(size_t bytes);

// A kernel's __shared__ array becomes `static auto& name = shared_storage<T[n]>();` in the
// generated code: one array for every block (they run one at a time), placed so that an access
// past its end faults.
template <typename Array>
Array& shared_storage() {
  return *static_cast<Array*>(guarded_allocation(sizeof(Array)));
}

// Called where the kernel declares the array: the first thread of each block to get there fills
// it with NaN bytes, so a value read before any thread of the block wrote it shows up in the
// results. Also enforces CUDA's 48 KB of static shared memory per block.
void shared_array(void* array, size_t bytes);

struct LaunchRecord {
  dim3 grid, block;
};
// Every launch since the last clear_launches(), in order.
const std::vector<LaunchRecord>& launches();
void clear_launches();

}  // namespace emu

#define threadIdx (::emu::checked(::emu::g_thread_idx, "threadIdx"))
#define blockIdx (::emu::checked(::emu::g_block_idx, "blockIdx"))
#define blockDim (::emu::checked(::emu::g_block_dim, "blockDim"))
#define gridDim (::emu::checked(::emu::g_grid_dim, "gridDim"))
#define __syncthreads() ::emu::syncthreads(__FILE__, __LINE__)
#define __shfl_xor_sync(mask, value, lane_mask) \
  ::emu::shfl_xor((mask), (value), (lane_mask), __FILE__, __LINE__)
