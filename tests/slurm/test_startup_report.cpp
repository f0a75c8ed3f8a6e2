// train's start-up report (launch/training/startup_report.h) from made-up node maps: the rank
// ranges per host, the threads per rank, and a warning for exactly the tp groups split across
// hosts, the case a single test machine cannot produce for real.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launch/training/startup_report.h"

namespace gpt {
namespace {

std::vector<std::string> texts(const std::vector<ReportLine>& lines, bool warnings) {
  std::vector<std::string> out;
  for (const ReportLine& line : lines)
    if (line.warning == warnings) out.push_back(line.text);
  return out;
}

TEST(StartupReport, OneHostEveryTpGroupTogether) {
  const auto lines = startup_report_lines({2, 1, 2}, {"vm", "vm", "vm", "vm"}, {1, 1, 1, 1});
  EXPECT_EQ(texts(lines, false),
            (std::vector<std::string>{
                "grid: tp=2 dp=1 pp=2 over 4 ranks on 1 host, 1 CPU thread per rank",
                "node vm: ranks 0-3 (1 CPU thread per rank)",
                "every tp group (2 ranks) is on one node"}));
  EXPECT_TRUE(texts(lines, true).empty());
}

TEST(StartupReport, HostsInOrderOfTheirLowestRankWithRangesAndThreads) {
  // 16 ranks at tp 4 x pp 4, one stage per node, the last node with fewer CPUs per rank.
  std::vector<std::string> hosts;
  std::vector<int> threads;
  for (int r = 0; r < 16; ++r) {
    hosts.push_back("node" + std::to_string(3 - r / 4));
    threads.push_back(r < 12 ? 8 : 4);
  }
  const auto lines = startup_report_lines({4, 1, 4}, hosts, threads);
  EXPECT_EQ(texts(lines, false),
            (std::vector<std::string>{
                "grid: tp=4 dp=1 pp=4 over 16 ranks on 4 hosts, 4-8 CPU threads per rank",
                "node node3: ranks 0-3 (8 CPU threads per rank)",
                "node node2: ranks 4-7 (8 CPU threads per rank)",
                "node node1: ranks 8-11 (8 CPU threads per rank)",
                "node node0: ranks 12-15 (4 CPU threads per rank)",
                "every tp group (4 ranks) is on one node"}));
}

TEST(StartupReport, WarnsForEachTpGroupAcrossHosts) {
  // Cyclic placement (a, b, a, b, ...) at tp 2: every tp group spans both hosts.
  const auto lines = startup_report_lines({2, 2, 1}, {"a", "b", "a", "b"}, {2, 2, 2, 2});
  EXPECT_EQ(texts(lines, false)[1], "node a: ranks 0,2 (2 CPU threads per rank)");
  EXPECT_EQ(texts(lines, false)[2], "node b: ranks 1,3 (2 CPU threads per rank)");
  EXPECT_EQ(texts(lines, true),
            (std::vector<std::string>{
                "tp group of ranks 0-1 spans hosts a, b: its all-reduces leave the node",
                "tp group of ranks 2-3 spans hosts a, b: its all-reduces leave the node"}));
}

TEST(StartupReport, OnlyTheSplitGroupIsNamed) {
  // 6 ranks at tp 2 over hosts of 3 ranks: group {2,3} straddles the boundary.
  const auto lines =
      startup_report_lines({2, 3, 1}, {"x", "x", "x", "y", "y", "y"}, {1, 1, 1, 1, 1, 1});
  EXPECT_EQ(texts(lines, true),
            (std::vector<std::string>{
                "tp group of ranks 2-3 spans hosts x, y: its all-reduces leave the node"}));
  EXPECT_EQ(texts(lines, false).back(), "node y: ranks 3-5 (1 CPU thread per rank)");
}

TEST(StartupReport, NoTpLineAtTp1) {
  const auto lines = startup_report_lines({1, 2, 1}, {"a", "b"}, {3, 3});
  EXPECT_EQ(texts(lines, false).size(), 3u);
  EXPECT_TRUE(texts(lines, true).empty());
}

}  // namespace
}  // namespace gpt
