// The communication watchdog (--comm-timeout, docs/OPERATIONS.md "Watchdog"). A thread on every
// rank publishes the rank's operation log as a small JSON file in a directory all ranks share
// (<checkpoint-dir>/.watchdog: checkpoints already need a file system every node sees, and a file
// reaches the other ranks while their main threads are blocked inside MPI, which no message of
// ours could). When an operation has waited longer than the timeout, the thread marks itself
// timed out, gives the others a grace period to publish theirs, and reads every rank's file:
// the lowest timed-out rank writes the report (stall_report.h) to stderr and to
// <dir>/.watchdog/report.txt, and every timed-out rank ends the job with MPI_Abort, exit code 4.
// The thread makes no MPI or HDF5 call but that abort (MPI is initialised SERIALIZED).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/process_grid.h"
#include "parallel/stall_report.h"

namespace gpt {

inline constexpr int kExitWatchdog = 4;

// Removes the heartbeat files (rank-*.json, and their temporaries) that a job killed before its
// watchdogs stopped left in `directory`, and the directory once empty; a report.txt of a job the
// watchdog ended stays, for the user. Returns how many files went. Call on one rank, holding the
// checkpoint folder's lock, before any rank starts its watchdog.
int remove_stale_heartbeats(const std::string& directory);

class Watchdog {
 public:
  // Collective over the grid's world (the ranks agree on a job id, so files another job left are
  // ignored). Creates <directory>; throws a one-line error when it cannot.
  Watchdog(ProcessGrid& grid, const std::string& directory, double timeout_s);
  // Stops the thread and removes this rank's file, and the directory once it is empty.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void watch();
  // Reads everyone's heartbeats again (a rank whose beat did not advance since at_notice is not
  // beating), reports if this is the lowest timed-out rank, and aborts the job.
  [[noreturn]] void end_job(const std::vector<RankEvidence>& at_notice,
                            std::chrono::duration<double> grace);

  OperationLog& operations_;
  const std::string directory_;
  const double timeout_s_;
  const int world_size_;
  Heartbeat heartbeat_;  // the fields that do not change; the thread fills in the rest
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gpt
