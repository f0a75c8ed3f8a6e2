// The start-up deadline's timer thread (startup_deadline.h). Ending the job from a thread while
// the main thread may be blocked inside MPI or a file system is the watchdog's way too: MPI_Abort,
// the one MPI call this thread makes (MPI is initialised SERIALIZED).
#include "launch/training/startup_deadline.h"

#include <mpi.h>

#include <chrono>

#include "framework/check.h"
#include "framework/logging.h"
#include "launch/training/watchdog.h"

namespace gpt {

StartupDeadline::StartupDeadline(double timeout_s) : timeout_s_(timeout_s) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { wait(); });
}

StartupDeadline::~StartupDeadline() {
  finish();
}

void StartupDeadline::enter(const std::string& part) {
  std::lock_guard<std::mutex> lock(mutex_);
  part_ = part;
}

void StartupDeadline::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StartupDeadline::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (wake_.wait_for(lock, std::chrono::duration<double>(timeout_s_), [this] { return finished_; }))
    return;
  log::error(GPT_MSG("start-up did not reach the first step within --startup-timeout "
                     << timeout_s_ << " s (this rank was " << part_
                     << "); ending the job with exit code " << kExitWatchdog));
  MPI_Abort(MPI_COMM_WORLD, kExitWatchdog);
}

}  // namespace gpt
