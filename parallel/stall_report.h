// The watchdog's evidence and verdict (docs/OPERATIONS.md "Watchdog"). Each rank's watchdog
// thread publishes a Heartbeat (its operation log, and whether it has waited past the timeout);
// when one times out it gathers everyone's and writes a report in the manner of PyTorch's flight
// recorder: who waited, in which operation of which channel, for how long, and the likely
// culprit: a rank of that channel that stopped beating (stopped, or dead) or that never reached
// the operation. Pure functions of the heartbeats, so every case is tested without a stall.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/json.h"
#include "parallel/operation_log.h"
#include "parallel/process_grid.h"

namespace gpt {

struct Heartbeat {
  std::string job;  // the same on every rank of one job: other jobs' files are ignored
  int rank = 0;
  GridCoordinates coordinates;
  std::string host;
  int64_t pid = 0;
  int64_t beat = 0;        // advances each time the watchdog thread writes
  double unix_time = 0;    // when written (wall clock: compared across hosts, roughly)
  bool timed_out = false;  // this rank has waited past the timeout
  OperationSnapshot operations;
};

Json heartbeat_to_json(const Heartbeat& heartbeat);
// Throws a one-line input error naming `what` when the JSON is not a heartbeat.
Heartbeat heartbeat_from_json(const Json& json, const std::string& what);

// What the reporting rank knows of one rank: its newest heartbeat of this job (none: missing,
// unreadable, or another job's), and whether it beat again during the watchdog's grace period.
struct RankEvidence {
  std::optional<Heartbeat> heartbeat;
  bool beating = false;
};

// The report's lines: one per rank that waited past timeout_s (or is waiting), then the likely
// culprits with the reason for each. evidence[r] is global rank r; now is the reporter's wall
// clock.
std::vector<std::string> stall_report(const std::vector<RankEvidence>& evidence, double timeout_s,
                                      double now);

}  // namespace gpt
