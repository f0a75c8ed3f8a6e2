// Progress for a non-blocking MPI operation while this thread computes. Open MPI moves a
// non-blocking collective forward only inside MPI calls, so one posted before a long product and
// waited after it would otherwise do all its work at the wait. A helper thread, started on first
// use, tests the request every kInterval while the work runs, and is idle between uses. It calls
// MPI only while the owner thread is inside work() (which must make no MPI call), which
// MPI_THREAD_SERIALIZED allows; under a lower thread level work() just runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "parallel/communicator.h"

namespace gpt {

class BackgroundProgress {
 public:
  static constexpr std::chrono::microseconds kInterval{100};

  BackgroundProgress() = default;
  ~BackgroundProgress();
  BackgroundProgress(const BackgroundProgress&) = delete;
  BackgroundProgress& operator=(const BackgroundProgress&) = delete;

  // Runs work() on this thread while the helper progresses `request`.
  void overlap(Request& request, const std::function<void()>& work);

 private:
  void loop();

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Request* active_ = nullptr;  // the request to progress; null when idle
  bool testing_ = false;       // the helper is inside active_->progress()
  bool stop_ = false;
};

}  // namespace gpt
