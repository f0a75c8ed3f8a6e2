// A backend buffer that only ever grows, for per-call scratch (the CUDA kernels' scratch, the
// bf16 copies of product operands on either backend). It is reallocated only when a larger size
// is first asked for; the trainer reserves the memory model's largest request up front
// (Backend::reserve_scratch), so in training it never grows mid-run.
#pragma once

#include <cstddef>

namespace gpt {

class Backend;

class GrowingBuffer {
 public:
  void* get(Backend& backend, size_t bytes);  // counted as workspace
  void* data() const { return ptr_; }         // what the last get() returned

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace gpt
