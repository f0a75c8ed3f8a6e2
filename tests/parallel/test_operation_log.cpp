// The watchdog's evidence, at 1, 2 and 4 ranks: the grid's communicators count every operation on
// channels whose names and sequence numbers agree across the ranks that take part (collectives
// on the group, messages on their direction, counted at both ends), blocked operations are
// listed only while they wait, and the stall report names the right culprit for each kind of
// evidence: a silent rank, a busy one, a chain of waits, a missing heartbeat, none.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "parallel/process_grid.h"
#include "parallel/stall_report.h"
#include "tests/test_util.h"

namespace gpt {
namespace {

TEST(ChannelName, ListsMembersWithRuns) {
  EXPECT_EQ(channel_name("tp", {0, 1}), "tp[0,1]");
  EXPECT_EQ(channel_name("world", {0, 1, 2, 3}), "world[0-3]");
  EXPECT_EQ(channel_name("pp", {1, 5, 9, 10, 11}), "pp[1,5,9-11]");
  EXPECT_EQ(message_channel_name("pp", 4, 0), "pp[4>0]");
}

// Every rank's issued count on every channel, gathered: a channel's count must be the same on
// each of its members.
TEST(OperationLog, ChannelsAgreeAcrossRanks) {
  const int world = world_size();
  ProcessGrid grid(MPI_COMM_WORLD, {{1, 1, world}, 0, false});
  float value = 1.0f;
  grid.world().all_reduce(&value, 1, ReduceOp::kSum);
  EXPECT_EQ(value, static_cast<float>(world));
  // A ring of messages over pp: every rank sends to the next and receives from the previous.
  const int next = (grid.stage() + 1) % world, previous = (grid.stage() + world - 1) % world;
  for (int round = 0; round < 3; ++round) {
    float out = static_cast<float>(round), in = -1.0f;
    auto receiving = grid.pp().irecv(&in, 1, previous);
    auto sending = grid.pp().isend(&out, 1, next);
    receiving->wait();
    sending->wait();
    EXPECT_EQ(in, static_cast<float>(round));
  }
  const OperationSnapshot s = grid.operations().snapshot();
  EXPECT_TRUE(s.blocked.empty());
  const std::string everyone = channel_name("world", [&] {
    std::vector<int> all;
    for (int r = 0; r < world; ++r) all.push_back(r);
    return all;
  }());
  ASSERT_TRUE(s.channels.count(everyone));
  EXPECT_EQ(s.channels.at(everyone).issued, 1);
  const int me = grid.global_rank();
  const std::string out = message_channel_name("pp", me, next);
  const std::string in = message_channel_name("pp", previous, me);
  ASSERT_TRUE(s.channels.count(out));
  ASSERT_TRUE(s.channels.count(in));
  // At one rank the ring is a rank sending to itself: both names are one channel, counted twice.
  EXPECT_EQ(s.channels.at(out).issued, world == 1 ? 6 : 3);
  EXPECT_EQ(s.channels.at(in).issued, world == 1 ? 6 : 3);
  EXPECT_EQ(s.channels.at(out).members, (std::vector<int>{me, next}));
}

TEST(OperationLog, BlockedOnlyWhileWaiting) {
  OperationLog log;
  const int channel = log.channel("tp[0,1]", {0, 1});
  {
    OperationLog::Wait waiting(log, log.issue(channel, "all_reduce"));
    const OperationSnapshot s = log.snapshot();
    ASSERT_EQ(s.blocked.size(), 1u);
    EXPECT_EQ(s.blocked[0].channel, "tp[0,1]");
    EXPECT_EQ(s.blocked[0].op, std::string("all_reduce"));
    EXPECT_EQ(s.blocked[0].seq, 1);
    EXPECT_GE(s.blocked[0].waited_s, 0.0);
  }
  EXPECT_TRUE(log.snapshot().blocked.empty());
  EXPECT_EQ(log.issue(channel, "barrier").seq, 2);
  EXPECT_EQ(log.channel("tp[0,1]", {0, 1}), channel);  // registered once
}

// A heartbeat of rank r: coordinates (r % 2, 0, r / 2), issued counts, optionally blocked.
Heartbeat heartbeat(int rank, std::map<std::string, ChannelState> channels,
                    std::vector<BlockedOperation> blocked, bool timed_out) {
  Heartbeat h;
  h.job = "job";
  h.rank = rank;
  h.coordinates = {rank % 2, 0, rank / 2};
  h.host = "node" + std::to_string(rank / 2);
  h.pid = 100 + rank;
  h.beat = 7;
  h.unix_time = 1000.0;
  h.timed_out = timed_out;
  h.operations = {std::move(channels), std::move(blocked)};
  return h;
}

// The line of the report that starts with `prefix`, or "".
std::string line_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const std::string& line : lines)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// Two ranks of a pp pair: rank 0 waits for message #5 from rank 2.
std::vector<RankEvidence> pair_waiting_on_rank2(int64_t rank2_sent, bool rank2_beating,
                                                std::vector<BlockedOperation> rank2_blocked) {
  const std::vector<int> pair{2, 0};
  std::vector<RankEvidence> e(4);
  e[0] = {heartbeat(0, {{"pp[2>0]", {pair, 5}}}, {{"pp[2>0]", "recv", 5, 30.0}}, true), true};
  e[1] = {heartbeat(1, {}, {}, false), true};
  e[2] = {heartbeat(2, {{"pp[2>0]", {pair, rank2_sent}}}, std::move(rank2_blocked), false),
          rank2_beating};
  e[3] = {heartbeat(3, {}, {}, false), true};
  return e;
}

TEST(StallReport, SilentRankIsTheCulprit) {
  const auto lines = stall_report(
      pair_waiting_on_rank2(4, false, {{"tp[2,3]", "all_reduce", 9, 0.1}}), 20.0, 1025.0);
  EXPECT_NE(line_starting(lines,
                          "rank 0 (tp 0, dp 0, stage 0, host node0, pid 100) timed out in "
                          "pp[2>0] recv #5 after 30.0 s"),
            "");
  const std::string culprit = line_starting(lines, "likely culprit: rank 2 (tp 0, dp 0, stage 1");
  ASSERT_NE(culprit, "") << lines.back();
  EXPECT_NE(culprit.find("no heartbeat for 25.0 s"), std::string::npos) << culprit;
  EXPECT_NE(culprit.find("reached pp[2>0] #4 of the #5 awaited"), std::string::npos) << culprit;
  EXPECT_NE(culprit.find("in tp[2,3] all_reduce #9"), std::string::npos) << culprit;
}

TEST(StallReport, BusyRankThatNeverArrivedIsTheCulprit) {
  const auto lines = stall_report(pair_waiting_on_rank2(4, true, {}), 20.0, 1001.0);
  const std::string culprit = line_starting(lines, "likely culprit: rank 2");
  ASSERT_NE(culprit, "") << lines.back();
  EXPECT_NE(culprit.find("not communicating (computing, or hung outside communication)"),
            std::string::npos)
      << culprit;
}

TEST(StallReport, RankThatReachedTheOperationIsNotSuspected) {
  const auto lines = stall_report(pair_waiting_on_rank2(5, true, {}), 20.0, 1001.0);
  EXPECT_EQ(line_starting(lines, "likely culprit"), "");
  EXPECT_NE(line_starting(lines, "no culprit found"), "");
}

TEST(StallReport, MissingHeartbeatIsNamed) {
  auto evidence = pair_waiting_on_rank2(4, true, {});
  evidence[2] = {};
  const std::string culprit = line_starting(stall_report(evidence, 20.0, 1001.0), "likely culprit");
  EXPECT_NE(culprit.find("rank 2: no heartbeat of this job"), std::string::npos) << culprit;
}

// Rank 0 waits on rank 2, which waits on rank 3, which stopped: rank 3 is the culprit and rank
// 2 is not blamed.
TEST(StallReport, ChainOfWaitsEndsAtTheSilentRank) {
  auto evidence = pair_waiting_on_rank2(4, true, {{"tp[2,3]", "all_reduce", 9, 25.0}});
  evidence[2].heartbeat->timed_out = true;
  evidence[2].heartbeat->operations.channels["tp[2,3]"] = {{2, 3}, 9};
  evidence[3].heartbeat->operations.channels["tp[2,3]"] = {{2, 3}, 8};
  evidence[3].beating = false;
  const auto lines = stall_report(evidence, 20.0, 1030.0);
  EXPECT_NE(line_starting(lines, "likely culprit: rank 3"), "");
  EXPECT_EQ(line_starting(lines, "likely culprit: rank 2"), "");
  EXPECT_NE(line_starting(lines,
                          "rank 2 (tp 0, dp 0, stage 1, host node1, pid 102) timed out in "
                          "tp[2,3] all_reduce #9"),
            "");
}

TEST(StallReport, HeartbeatJsonRoundTrip) {
  const Heartbeat h =
      heartbeat(3, {{"tp[2,3]", {{2, 3}, 41}}}, {{"tp[2,3]", "all_gather", 41, 1.5}}, true);
  const Heartbeat back = heartbeat_from_json(heartbeat_to_json(h), "heartbeat");
  EXPECT_EQ(heartbeat_to_json(back).dump(), heartbeat_to_json(h).dump());
  expect_error(
      [] {
        heartbeat_from_json(Json{{"job", "x"}}, "rank-00001.json");
      },
      {"rank-00001.json", "rank"});
}

}  // namespace
}  // namespace gpt
