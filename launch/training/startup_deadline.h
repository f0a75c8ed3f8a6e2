// The start-up deadline (--startup-timeout, docs/OPERATIONS.md "Watchdog"): the watchdog watches
// the communication of training steps, and needs the grid and the checkpoint folder to exist
// before it can; everything before that (options, data and checkpoint files, the runtime's
// communicators and devices, the checkpoint folder) is watched by this one timer instead. A rank
// whose start-up has not reached the first step when the time is up says which part it was in
// and ends the job with the watchdog's exit code. The part is named by the program as it goes.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace gpt {

class StartupDeadline {
 public:
  // No thread and no deadline at timeout_s <= 0.
  explicit StartupDeadline(double timeout_s);
  // Stops the thread (the start-up ended, or failed with its own message).
  ~StartupDeadline();
  StartupDeadline(const StartupDeadline&) = delete;
  StartupDeadline& operator=(const StartupDeadline&) = delete;

  // What start-up does now, as the message will say it: "loading the checkpoint".
  void enter(const std::string& part);
  // Start-up reached the first step: the deadline no longer applies.
  void finish();

 private:
  void wait();

  const double timeout_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string part_ = "starting";
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace gpt
