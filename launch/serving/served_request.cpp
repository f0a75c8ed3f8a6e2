// The inbox between serve's HTTP threads and its scheduling loop (see served_request.h).
#include "launch/serving/served_request.h"

namespace gpt {

bool RequestInbox::push(std::shared_ptr<ServedRequest> request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || queue_.size() + held_ >= capacity_) return false;
    queue_.push_back(std::move(request));
  }
  arrived_.notify_one();
  return true;
}

std::vector<std::shared_ptr<ServedRequest>> RequestInbox::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (queue_.empty()) arrived_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
  std::vector<std::shared_ptr<ServedRequest>> taken(queue_.begin(), queue_.end());
  queue_.clear();
  held_ += taken.size();  // counted against the bound until the loop says how many still wait
  return taken;
}

void RequestInbox::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

bool RequestInbox::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

size_t RequestInbox::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void RequestInbox::set_held(size_t held) {
  std::lock_guard<std::mutex> lock(mutex_);
  held_ = held;
}

}  // namespace gpt
