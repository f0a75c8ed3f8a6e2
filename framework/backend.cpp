// The non-virtual part of Backend: every allocation is counted in the ledger by category.
#include "framework/backend.h"

namespace gpt {

int64_t attention_cache_floats(DeviceKind kind, int64_t B, int64_t NH, int64_t T) {
  return kind == DeviceKind::kCpu ? B * NH * T * T : B * NH * T;
}

int64_t attention_scratch_floats(DeviceKind kind, int64_t B, int64_t NH, int64_t T) {
  return kind == DeviceKind::kCpu ? B * NH * T * T : B * NH * T;
}

void* Backend::allocate(size_t bytes, MemoryCategory category) {
  if (bytes == 0) return nullptr;
  void* ptr = raw_allocate(bytes);
  const size_t unit = allocation_granularity();
  memory_.add(ptr, static_cast<int64_t>((bytes + unit - 1) / unit * unit), category);
  return ptr;
}

void Backend::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  memory_.remove(ptr);
  raw_deallocate(ptr);
}

}  // namespace gpt
