// The CUDA backend's device memory: one cudaMalloc at start-up, carved into 256-byte-aligned
// blocks by a BlockAllocator, so no training step ever calls the CUDA allocator (whose cudaFree
// synchronizes the whole device).
#pragma once

#include <cstddef>

#include "framework/block_allocator.h"

namespace gpt::cuda {

class DeviceArena {
 public:
  static constexpr size_t kAlignment = 256;  // cuBLASLt's preferred alignment, a cache sector
  explicit DeviceArena(size_t capacity_bytes);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Null for zero bytes; throws a one-line input error naming --memory-limit-gb when the arena is
  // exhausted.
  void* allocate(size_t bytes);
  void release(void* ptr);  // null is ignored

  bool contains(const void* ptr) const {
    const char* p = static_cast<const char*>(ptr);
    return p >= base_ && p < base_ + blocks_.capacity();
  }
  size_t capacity() const { return blocks_.capacity(); }
  size_t in_use() const { return blocks_.in_use(); }
  size_t peak() const { return blocks_.peak(); }

 private:
  BlockAllocator blocks_;
  char* base_ = nullptr;
};

}  // namespace gpt::cuda
