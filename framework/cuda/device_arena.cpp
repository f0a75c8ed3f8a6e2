// DeviceArena (see the header).
#include "framework/cuda/device_arena.h"

#include "framework/cuda/cuda_check.h"

namespace gpt::cuda {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

DeviceArena::DeviceArena(size_t capacity_bytes) : blocks_(capacity_bytes, kAlignment) {
  GPT_INPUT_CHECK(blocks_.capacity() > 0,
                  "--memory-limit-gb leaves no device memory for the arena");
  const cudaError_t rc = cudaMalloc(reinterpret_cast<void**>(&base_), blocks_.capacity());
  GPT_INPUT_CHECK(rc == cudaSuccess, "cannot reserve a device arena of "
                                         << blocks_.capacity() / kGiB << " GiB ("
                                         << cudaGetErrorString(rc) << "): lower --memory-limit-gb");
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) cudaFree(base_);  // no check: destructors run during error unwinding
}

void* DeviceArena::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::optional<size_t> offset = blocks_.allocate(bytes);
  GPT_INPUT_CHECK(offset.has_value(), "the device arena of "
                                          << capacity() / kGiB << " GiB is exhausted ("
                                          << in_use() / kGiB << " GiB in use, "
                                          << blocks_.rounded(bytes) / kGiB
                                          << " GiB more needed): raise --memory-limit-gb or lower "
                                             "--micro-batch-size");
  return base_ + *offset;
}

void DeviceArena::release(void* ptr) {
  if (ptr == nullptr) return;
  GPT_CHECK(contains(ptr), "releasing a pointer the device arena did not allocate");
  blocks_.release(static_cast<size_t>(static_cast<char*>(ptr) - base_));
}

}  // namespace gpt::cuda
