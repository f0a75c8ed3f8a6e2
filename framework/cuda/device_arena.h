// The CUDA backend's device memory: one cudaMalloc at start-up, carved by first fit into
// 256-byte-aligned blocks, so no training step ever calls the CUDA allocator (whose cudaFree
// synchronizes the whole device). Freed blocks merge with free neighbours.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>

namespace gpt::cuda {

class DeviceArena {
 public:
  explicit DeviceArena(size_t capacity_bytes);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Throws a one-line input error naming --gpu-memory-gb when the arena is exhausted.
  void* allocate(size_t bytes);
  void release(void* ptr);

  bool contains(const void* ptr) const {
    const char* p = static_cast<const char*>(ptr);
    return p >= base_ && p < base_ + capacity_;
  }
  size_t capacity() const { return capacity_; }
  size_t in_use() const { return in_use_; }
  size_t peak() const { return peak_; }

 private:
  char* base_ = nullptr;
  size_t capacity_ = 0, in_use_ = 0, peak_ = 0;
  std::map<size_t, size_t> free_;                // offset -> size, ordered for merging
  std::unordered_map<void*, size_t> allocated_;  // pointer -> size
};

}  // namespace gpt::cuda
