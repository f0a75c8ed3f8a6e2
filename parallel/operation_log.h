// What this rank's communication is doing, for the watchdog (docs/OPERATIONS.md "Watchdog").
// Every operation is counted on a channel, and the operations this rank is blocked in are listed
// with the time their wait began. A channel names the ranks on both sides, so one operation has
// the same channel and sequence number on every rank that takes part; comparing the counts of the
// ranks then tells which one never reached it. A collective's channel is its group
// ("tp[0,1]"); a point-to-point message's is its direction ("pp[0>2]"), counted by both ends.
// The main thread records; the watchdog thread reads snapshots, so every member is guarded.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gpt {

struct ChannelState {
  std::vector<int> members;  // global ranks
  int64_t issued = 0;        // operations this rank has started on the channel
};

// An operation this rank is blocked in.
struct BlockedOperation {
  std::string channel;
  std::string op;   // "all_reduce", "recv", "checkpoint write", ...
  int64_t seq = 0;  // 1-based, on the channel
  double waited_s = 0;
};

struct OperationSnapshot {
  std::map<std::string, ChannelState> channels;
  std::vector<BlockedOperation> blocked;  // oldest first
};

// An operation counted on a channel (its place in the channel's sequence).
struct OperationTicket {
  int channel = -1;
  const char* op = "";
  int64_t seq = 0;
};

class OperationLog {
 public:
  using Clock = std::chrono::steady_clock;

  // While alive, this rank is blocked in the ticket's operation.
  class Wait {
   public:
    Wait(OperationLog& log, const OperationTicket& ticket);
    ~Wait();
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;

   private:
    OperationLog& log_;
    int64_t id_;
  };

  // The channel's index (registered on first use): `name` must already hold the member list,
  // e.g. channel_name("tp", {0, 1}).
  int channel(const std::string& name, const std::vector<int>& members);
  OperationTicket issue(int channel, const char* op);
  OperationSnapshot snapshot() const;

 private:
  struct Blocked {
    int64_t id;
    OperationTicket ticket;
    Clock::time_point since;
  };
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  std::vector<ChannelState> channels_;
  std::vector<Blocked> blocked_;
  int64_t next_wait_id_ = 0;
};

// "tp[0,1]", "world[0-15]": a group name with its global ranks, runs of consecutive ranks
// shortened.
std::string channel_name(const std::string& group, const std::vector<int>& members);
// "pp[0>2]": messages from global rank `from` to global rank `to` in a group.
std::string message_channel_name(const std::string& group, int from, int to);

}  // namespace gpt
