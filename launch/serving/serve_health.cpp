// serve's health (see serve_health.h).
#include "launch/serving/serve_health.h"

#include <chrono>
#include <cstdio>

namespace gpt {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ServeHealth::ServeHealth() : last_beat_ns_(now_ns()) {}

void ServeHealth::beat() {
  last_beat_ns_ = now_ns();
}

void ServeHealth::fail(const std::string& cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty()) failure_ = "the server failed: " + cause;
}

std::string ServeHealth::problem(double stall_timeout_s) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) return failure_;
  }
  const double quiet = static_cast<double>(now_ns() - last_beat_ns_.load()) * 1e-9;
  if (quiet <= stall_timeout_s) return "";
  char text[160];
  std::snprintf(text, sizeof text,
                "the ranks have not all taken part in a step for %.1f s (--stall-timeout %g): "
                "a rank is stopped or unreachable",
                quiet, stall_timeout_s);
  return text;
}

}  // namespace gpt
