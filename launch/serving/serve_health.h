// Whether serve can still answer, as /health reports it and the HTTP side acts on it (serve,
// rank 0). Two things end its health: the step loop failed (an exception on rank 0: the job
// ends), or the ranks have not all taken part in a step for longer than the stall timeout (a
// rank stopped, a peer gone quiet): rank 0's loop may then be blocked inside MPI, so it is the
// HTTP side that sees the stall, by the age of the last heartbeat, and answers 503.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace gpt {

class ServeHealth {
 public:
  ServeHealth();
  // Every rank reached the same step (a barrier of all ranks completed) just now.
  void beat();
  void fail(const std::string& cause);
  // Empty while healthy; otherwise a one-line reason.
  std::string problem(double stall_timeout_s) const;

 private:
  std::atomic<double> last_beat_s_;  // framework/timer.h's now_seconds()
  mutable std::mutex mutex_;
  std::string failure_;
};

}  // namespace gpt
