// serve's health (see serve_health.h).
#include "launch/serving/serve_health.h"

#include <cstdio>

#include "framework/timer.h"

namespace gpt {

ServeHealth::ServeHealth() : last_beat_s_(now_seconds()) {}

void ServeHealth::beat() {
  last_beat_s_ = now_seconds();
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
  const double quiet = now_seconds() - last_beat_s_.load();
  if (quiet <= stall_timeout_s) return "";
  char text[160];
  std::snprintf(text, sizeof text,
                "the ranks have not all taken part in a step for %.1f s (--stall-timeout %g): "
                "a rank is stopped or unreachable",
                quiet, stall_timeout_s);
  return text;
}

}  // namespace gpt
