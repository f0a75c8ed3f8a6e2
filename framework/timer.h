// Wall-clock timing for the step's time split (compute, tp, dp, pipeline wait). A ScopedTimer adds
// the seconds of its scope to a counter; the backend is synchronised first so asynchronous
// device work is charged to the right phase.
#pragma once

#include <chrono>

#include "framework/backend.h"

namespace gpt {

inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

class ScopedTimer {
 public:
  ScopedTimer(double& counter, Backend* backend = nullptr) : counter_(counter), backend_(backend) {
    if (backend_) backend_->synchronize();
    start_ = now_seconds();
  }
  ~ScopedTimer() {
    if (backend_) backend_->synchronize();
    counter_ += now_seconds() - start_;
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double& counter_;
  Backend* backend_;
  double start_ = 0.0;
};

}  // namespace gpt
