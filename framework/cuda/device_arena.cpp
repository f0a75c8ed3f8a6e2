// DeviceArena (see the header).
#include "framework/cuda/device_arena.h"

#include <iterator>

#include "framework/cuda/cuda_check.h"

namespace gpt::cuda {
namespace {
constexpr size_t kAlignment = 256;  // cuBLASLt's preferred alignment and a full cache sector
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

DeviceArena::DeviceArena(size_t capacity_bytes)
    : capacity_(capacity_bytes / kAlignment * kAlignment) {
  GPT_INPUT_CHECK(capacity_ > 0, "--gpu-memory-gb leaves no device memory for the arena");
  const cudaError_t rc = cudaMalloc(reinterpret_cast<void**>(&base_), capacity_);
  GPT_INPUT_CHECK(rc == cudaSuccess, "cannot reserve a device arena of "
                                         << capacity_ / kGiB << " GiB (" << cudaGetErrorString(rc)
                                         << "): lower --gpu-memory-gb");
  free_[0] = capacity_;
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) cudaFree(base_);  // no check: destructors run during error unwinding
}

void* DeviceArena::allocate(size_t bytes) {
  const size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (size == 0) return nullptr;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const size_t offset = it->first, left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[offset + size] = left;
    void* ptr = base_ + offset;
    allocated_[ptr] = size;
    in_use_ += size;
    if (in_use_ > peak_) peak_ = in_use_;
    return ptr;
  }
  fail_input(GPT_MSG("the device arena of " << capacity_ / kGiB << " GiB is exhausted ("
                                            << in_use_ / kGiB << " GiB in use, " << size / kGiB
                                            << " GiB more needed): raise --gpu-memory-gb or "
                                               "lower --micro-batch-size"));
}

void DeviceArena::release(void* ptr) {
  if (ptr == nullptr) return;
  auto found = allocated_.find(ptr);
  GPT_CHECK(found != allocated_.end(), "releasing a pointer the device arena did not allocate");
  size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - base_), size = found->second;
  allocated_.erase(found);
  in_use_ -= size;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

}  // namespace gpt::cuda
