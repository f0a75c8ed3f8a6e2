// One completion request as the HTTP side and the scheduling loop share it (serve, rank 0). The
// HTTP side fills the request and hands it over; the loop (the main thread, which alone talks to
// the other ranks) appends text as tokens come and marks it done, or failed, calling notify()
// after each change; a client that goes away, or an answer the HTTP side gave itself, marks it
// cancelled, and the loop frees its sequence at the next step. Everything mutable is under `mutex`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "launch/inference/sampling.h"

namespace gpt {

using ServeClock = std::chrono::steady_clock;

struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids
  int64_t max_tokens = 16;
  SamplingOptions sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool chat = false;           // from /v1/chat/completions: answered as chat objects
};

struct ServedRequest {
  int64_t id = 0;
  CompletionRequest request;
  ServeClock::time_point arrived;

  // Set by the HTTP side before the request is handed over, never after: called (from the
  // loop's thread, without `mutex` held) after each change.
  std::function<void()> on_change;
  void notify() const {
    if (on_change) on_change();
  }

  std::mutex mutex;
  std::string text;       // the completion's text so far (final once done)
  size_t streamed = 0;    // bytes of `text` a stream has sent
  size_t releasable = 0;  // bytes of `text` safe to send (no partial character or stop)
  int64_t completion_tokens = 0;
  bool done = false;
  bool cancelled = false;     // the client went away, or the server is stopping
  std::string finish_reason;  // "stop", "length", "abort"
  // The loop could not finish the request (done, with no text to give): its 5xx and message.
  int error_status = 0;
  std::string error_message;
};

// Requests waiting for the loop, bounded: a full inbox turns new requests away (503).
class RequestInbox {
 public:
  explicit RequestInbox(size_t capacity) : capacity_(capacity) {}
  // False when full or closed.
  bool push(std::shared_ptr<ServedRequest> request);
  // Everything waiting, in arrival order; waits up to `timeout` for the first when empty. What
  // it returns counts as held until the next set_held.
  std::vector<std::shared_ptr<ServedRequest>> take(std::chrono::milliseconds timeout);
  void close();  // no new requests from now on (shutdown)
  bool closed() const;
  size_t size() const;
  // The loop tells the inbox how many requests it holds itself, so the bound covers both.
  void set_held(size_t held);

 private:
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<std::shared_ptr<ServedRequest>> queue_;
  size_t capacity_, held_ = 0;
  bool closed_ = false;
};

}  // namespace gpt
