// GrowingBuffer: per-call scratch that is reallocated only to grow.
#include "framework/growing_buffer.h"

#include "framework/backend.h"

namespace gpt {

void* GrowingBuffer::get(Backend& backend, size_t bytes) {
  if (bytes <= bytes_) return ptr_;
  backend.deallocate(ptr_);  // a device backend synchronizes first: kernels may read the old one
  ptr_ = backend.allocate(bytes, MemoryCategory::kWorkspace);
  bytes_ = bytes;
  return ptr_;
}

}  // namespace gpt
