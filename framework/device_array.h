// An owning, typed array in a backend's memory (host memory on the CPU backend, device memory on
// CUDA), counted in the backend's memory ledger under the category it is made with. Move-only;
// freed through the backend that allocated it. Allocated once at set-up, so the training step
// never allocates.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "framework/backend.h"

namespace gpt {

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, int64_t count, MemoryCategory category)
      : backend_(&backend), count_(count) {
    if (count > 0)
      data_ = static_cast<T*>(backend.allocate(sizeof(T) * static_cast<size_t>(count), category));
  }
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      release();
      backend_ = std::exchange(other.backend_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return count_; }

  void upload(const std::vector<T>& host) {
    backend_->copy_from_host(data_, host.data(), sizeof(T) * host.size());
  }
  std::vector<T> download() const {
    std::vector<T> host(static_cast<size_t>(count_));
    if (count_ > 0) backend_->copy_to_host(host.data(), data_, sizeof(T) * host.size());
    return host;
  }

 private:
  void release() {
    if (data_ != nullptr) backend_->deallocate(data_);
    data_ = nullptr;
  }
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace gpt
