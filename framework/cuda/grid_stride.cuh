// Launch shapes of the CUDA backend's flat (grid-stride) kernels: a grid capped at a fixed block
// count, whatever the device, and loops that stride over the rest, so every element is visited
// once and the work per thread does not depend on the GPU it runs on.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace gpt::cuda {

inline constexpr int64_t kMaxGridBlocks = 1 << 16;  // enough to fill any GPU

// Blocks of `threads` for `work` elements, at most kMaxGridBlocks.
inline unsigned grid_for(int64_t work, int threads) {
  return static_cast<unsigned>(std::min((work + threads - 1) / threads, kMaxGridBlocks));
}

inline bool is_aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// a += b, per component for the float4 paths: the additions of the float path, four at a time.
// b by value: the float4 load of the element, as the float path loads a float.
__device__ inline void add_to(float& a, float b) {
  a += b;
}
__device__ inline void add_to(float4& a, float4 b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  a.w += b.w;
}

}  // namespace gpt::cuda
