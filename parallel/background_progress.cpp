// BackgroundProgress: a helper thread that tests one request while its owner computes.
#include "parallel/background_progress.h"

#include <mpi.h>

namespace gpt {

namespace {

bool mpi_allows_helper_calls() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_SERIALIZED;
}

}  // namespace

BackgroundProgress::~BackgroundProgress() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundProgress::overlap(Request& request, const std::function<void()>& work) {
  if (!mpi_allows_helper_calls()) {
    work();
    return;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  {
    std::lock_guard lock(mutex_);
    active_ = &request;
  }
  changed_.notify_all();
  // The helper must be out of MPI before this thread calls it again, also when work() throws.
  struct Release {
    BackgroundProgress& self;
    ~Release() {
      std::unique_lock lock(self.mutex_);
      self.active_ = nullptr;
      self.changed_.notify_all();
      self.changed_.wait(lock, [&] { return !self.testing_; });
    }
  } release{*this};
  work();
}

void BackgroundProgress::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (active_ == nullptr) {
      changed_.wait(lock);
      continue;
    }
    Request* request = active_;
    testing_ = true;
    lock.unlock();
    request->progress();
    lock.lock();
    testing_ = false;
    changed_.notify_all();
    changed_.wait_for(lock, kInterval, [&] { return stop_ || active_ != request; });
  }
}

}  // namespace gpt
