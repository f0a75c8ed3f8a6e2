// The planner's link model and cluster files: collective costs against their closed forms (ring
// and tree, latency plus bytes over bus bandwidth), a shaped link's burst, the bandwidth curve's
// interpolation, which link a group uses, the presets, and the cluster file's parsing and its
// one-line errors.
#include <gtest/gtest.h>

#include <cmath>

#include "framework/check.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/cluster_file.h"
#include "parallel/planner/core_sharing.h"
#include "parallel/planner/link_model.h"

namespace gpt {
namespace {

TEST(LinkModel, RingAndTreeCostsAreLatencyPlusBytesOverBandwidth) {
  const LinkModel link{100e9, 5e-6, {}};
  const double bytes = 1e9;
  // 8 ranks: ring 14 steps, tree 2*3 = 6; all-reduce moves 2*7/8 of the buffer.
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllReduce, bytes, 8),
                   6 * 5e-6 + 2 * 7.0 / 8 * bytes / 100e9);
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllGather, bytes, 8),
                   7 * 5e-6 + 7.0 / 8 * bytes / 100e9);
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kReduceScatter, bytes, 4),
                   3 * 5e-6 + 3.0 / 4 * bytes / 100e9);
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllReduce, bytes, 1), 0);
  EXPECT_DOUBLE_EQ(p2p_seconds(link, bytes), 5e-6 + bytes / 100e9);
  // Reduce-scatter then all-gather moves what one all-reduce moves (the distributed optimizer).
  const double rs_ag = collective_seconds(link, Collective::kReduceScatter, bytes, 8) +
                       collective_seconds(link, Collective::kAllGather, bytes, 8);
  EXPECT_NEAR(rs_ag - 14 * 5e-6,
              collective_seconds(link, Collective::kAllReduce, bytes, 8) - 6 * 5e-6, 1e-12);
}

// Open MPI's nonblocking collectives (libnbc), what train's dp buckets run on the CPU backend.
TEST(LinkModel, LibnbcCollectivesAreBinomialTrees) {
  const LinkModel link{100e9, 5e-6, {}};
  const double bytes = 1e9, whole = 5e-6 + bytes / 100e9;
  // In-place all-reduce over 8: 3 rounds of reduce, 3 of broadcast, the whole buffer each.
  EXPECT_DOUBLE_EQ(libnbc_seconds(link, Collective::kAllReduce, bytes, 8), 6 * whole);
  EXPECT_DOUBLE_EQ(libnbc_seconds(link, Collective::kAllReduce, bytes, 5), 6 * whole);
  // Over 2 it costs twice the ring's: the two directions take turns.
  EXPECT_DOUBLE_EQ(libnbc_seconds(link, Collective::kAllReduce, bytes, 2),
                   2 * collective_seconds(link, Collective::kAllReduce, bytes, 2) - 2 * 5e-6);
  // Reduce-scatter over 4: 2 rounds of reduce, then the root's 3 blocks of a quarter.
  EXPECT_DOUBLE_EQ(libnbc_seconds(link, Collective::kReduceScatter, bytes, 4),
                   2 * whole + 3 * (5e-6 + bytes / 4 / 100e9));
  EXPECT_DOUBLE_EQ(libnbc_seconds(link, Collective::kAllGather, bytes, 4),
                   collective_seconds(link, Collective::kAllGather, bytes, 4));
  EXPECT_DOUBLE_EQ(libnbc_seconds(link, Collective::kAllReduce, bytes, 1), 0);
  // A binomial round is one way: the one-way curve prices it where there is one.
  LinkModel shaped = link;
  shaped.one_way_curve = {{1e3, 200e9}, {1e12, 200e9}};
  EXPECT_DOUBLE_EQ(libnbc_seconds(shaped, Collective::kAllReduce, bytes, 2),
                   2 * (5e-6 + bytes / 200e9));
  // A pipeline's message is one way too; the collectives keep the curve.
  EXPECT_DOUBLE_EQ(p2p_seconds(shaped, bytes), 5e-6 + bytes / 200e9);
  EXPECT_DOUBLE_EQ(collective_seconds(shaped, Collective::kAllReduce, bytes, 2),
                   collective_seconds(link, Collective::kAllReduce, bytes, 2));
}

TEST(LinkModel, AShapedLinkPassesItsRefilledBurstAtOnce) {
  LinkModel link{1e8, 5e-6, {}};  // 100 MB/s
  link.burst = 50e3;              // 0.5 ms at the rate
  const double bytes = 200e3;     // 2 ms on the wire
  // Idle for 0.2 ms: that much refilled; for 10 ms: the whole bucket, no more.
  EXPECT_DOUBLE_EQ(p2p_seconds(link, bytes, 0.2e-3), 5e-6 + 2e-3 - 0.2e-3);
  EXPECT_DOUBLE_EQ(p2p_seconds(link, bytes, 10e-3), 5e-6 + 2e-3 - 0.5e-3);
  // A message within the bucket pays only its latency; no idle time, no credit.
  EXPECT_NEAR(p2p_seconds(link, 20e3, 10e-3), 5e-6, 1e-15);
  EXPECT_DOUBLE_EQ(p2p_seconds(link, bytes), 5e-6 + 2e-3);
  // A 2-rank all-reduce's wire time (the buffer once) alike.
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllReduce, bytes, 2, 10e-3),
                   2 * 5e-6 + 2e-3 - 0.5e-3);
  // Unshaped: idle time buys nothing.
  link.burst = 0;
  EXPECT_DOUBLE_EQ(p2p_seconds(link, bytes, 10e-3), 5e-6 + 2e-3);
}

TEST(LinkModel, CurveInterpolatesInLogSizeAndHoldsItsEnds) {
  const LinkModel link{0, 0, {{16e6, 240e9}, {8e9, 480e9}}};
  EXPECT_DOUBLE_EQ(link.bus_bandwidth(1e3), 240e9);
  EXPECT_DOUBLE_EQ(link.bus_bandwidth(16e6), 240e9);
  EXPECT_DOUBLE_EQ(link.bus_bandwidth(64e9), 480e9);
  // Halfway in log size between 16 MB and 8 GB (500x): 16 MB * sqrt(500).
  EXPECT_NEAR(link.bus_bandwidth(16e6 * std::sqrt(500.0)), 360e9, 1e3);
}

TEST(ClusterPresets, EveryPresetIsCompleteAndH200MatchesTheIssueFigures) {
  for (const std::string& name : cluster_preset_names()) {
    const Cluster c = cluster_preset(name);
    EXPECT_EQ(c.name, name);
    EXPECT_GT(c.gpu.peak_bf16, c.gpu.peak_fp32);
    // The CUDA cores' fp32 (this project's attention) is given, below the TF32 tensor peak.
    EXPECT_GT(c.gpu.peak_fp32_cuda_core, 0) << name;
    EXPECT_LT(c.gpu.peak_fp32_cuda_core, c.gpu.peak_fp32) << name;
    EXPECT_GT(c.intra_node.bus_bandwidth(1e9), c.inter_node.bus_bandwidth(1e9)) << name;
  }
  const Cluster h200 = cluster_preset("h200");
  EXPECT_DOUBLE_EQ(h200.intra_node.bus_bandwidth(16e6), 240e9);
  EXPECT_DOUBLE_EQ(h200.intra_node.bus_bandwidth(8e9), 480e9);
  EXPECT_THROW(cluster_preset("dgx-z100"), Error);
}

TEST(ClusterPresets, GroupLinkIsIntraNodeInsideANodeAndAddsNicsAcross) {
  const Cluster c = cluster_preset("dgx-a100");
  EXPECT_DOUBLE_EQ(group_link(c, 8, 1).bandwidth, c.intra_node.bandwidth);  // tp 8
  EXPECT_DOUBLE_EQ(group_link(c, 2, 4).bandwidth, c.intra_node.bandwidth);  // dp 2 beside tp 4
  // dp across nodes beside tp 8: one member a node, one NIC each.
  EXPECT_DOUBLE_EQ(group_link(c, 4, 8).bandwidth, c.inter_node.bandwidth);
  // dp 16 of tp 1 on two nodes: eight NICs a node, capped by NVLink.
  EXPECT_DOUBLE_EQ(group_link(c, 16, 1).bandwidth,
                   std::min(c.intra_node.bandwidth, 8 * c.inter_node.bandwidth));
}

TEST(ClusterPresets, GroupLinkFollowsRoundRobinPlacement) {
  const Cluster c = cluster_preset("dgx-a100");
  const RankPlacement by_node{true, 2};  // mpirun --map-by node over 2 nodes
  // Consecutive ranks alternate nodes: a tp pair crosses, one member a node.
  const LinkModel tp = group_link(c, 2, 1, by_node);
  EXPECT_TRUE(tp.crosses_nodes);
  EXPECT_DOUBLE_EQ(tp.bandwidth, c.inter_node.bandwidth);
  // Ranks an even distance apart share a node.
  EXPECT_FALSE(group_link(c, 4, 2, by_node).crosses_nodes);
  EXPECT_FALSE(group_link(c, 8, 1).crosses_nodes);
  // tp 4 over 2 nodes round robin: two members a node, two NICs.
  EXPECT_DOUBLE_EQ(group_link(c, 4, 1, by_node).bandwidth, 2 * c.inter_node.bandwidth);
  EXPECT_EQ(ranks_per_node(c, 16, by_node), 8);
  EXPECT_EQ(ranks_per_node(c, 16, {}), 8);
  EXPECT_EQ(ranks_per_node(c, 4, {}), 4);
  EXPECT_EQ(ranks_per_node(c, 5, {true, 2}), 3);
}

TEST(ClusterPresets, CpuClusterCollectivesCrossNodesAsOpenMpiDoes) {
  // Open MPI's all-reduce moves 2(k-1)/k of the buffer between k nodes where the ring model's
  // bus bytes are 2(n-1)/n: tp 4 over 2 nodes of 2 sees a link 1.5 times faster than a ring.
  Cluster c = cluster_preset("dgx-a100");
  c.gpus_per_node = 2;
  c.cpu.cores = 1;
  const LinkModel tp4 = group_link(c, 4, 1);
  EXPECT_DOUBLE_EQ(tp4.bandwidth, 2 * c.inter_node.bandwidth * 1.5);
  EXPECT_DOUBLE_EQ(group_link(c, 2, 2).bandwidth, c.inter_node.bandwidth);  // 2 ranks: alike
  // One link a node: the per-GPU figure is its share with both ranks talking; a tp 2 group
  // whose node-mate is not talking at that moment has all of it.
  const RankPlacement by_node{true, 2};
  EXPECT_DOUBLE_EQ(group_link(c, 2, 1, by_node, 2).bandwidth, c.inter_node.bandwidth);
  EXPECT_DOUBLE_EQ(group_link(c, 2, 1, by_node, 1).bandwidth, 2 * c.inter_node.bandwidth);
  EXPECT_DOUBLE_EQ(group_link(c, 4, 1, {}, 2).bandwidth, tp4.bandwidth);
}

const char* kFile = R"(# a 4-GPU-a-node H100 cluster
base = dgx-h100
name = h100x4
gpus_per_node = 4
[gpu]
memory_gb = 94   ; an H100 NVL
[intra_node]
bandwidth_gbs = 300
curve = 1MB:50, 1GB:300
[inter_node]
latency_us = 10
)";

TEST(ClusterFile, ParsesOverABaseAndReportsBadLinesInOneLine) {
  const Cluster c = parse_cluster_file(kFile, "test.ini");
  EXPECT_EQ(c.name, "h100x4");
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(c.gpu.memory_bytes, 94e9);
  EXPECT_DOUBLE_EQ(c.gpu.peak_bf16, cluster_preset("dgx-h100").gpu.peak_bf16);
  EXPECT_DOUBLE_EQ(c.intra_node.bus_bandwidth(1e6), 50e9);
  EXPECT_DOUBLE_EQ(c.inter_node.latency, 10e-6);
  const auto message = [](const std::string& text) {
    try {
      parse_cluster_file(text, "c.ini");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("[gpu]\nspeed = 3\n"), "c.ini line 2: unknown key 'gpu.speed'");
  EXPECT_EQ(message("[disk]\n"),
            "c.ini line 1: unknown section [disk] (gpu, intra_node, inter_node, cpu)");
  EXPECT_EQ(message("gpus_per_node 8\n"), "c.ini line 1: 'gpus_per_node 8' is not name = value");
  EXPECT_EQ(message("[intra_node]\ncurve = 1GB:300, 1MB:50\n"),
            "c.ini line 2: curve sizes must ascend");
  EXPECT_EQ(message("gpus_per_node = 8\n"),
            "c.ini: gpu.peak_bf16_tflops must be given and above 0");
  EXPECT_EQ(message("[inter_node]\nburst_kb = -1\n"),
            "c.ini line 2: '-1' is not a non-negative number");
  EXPECT_EQ(message("[intra_node]\neager_kb = -4\n"),
            "c.ini line 2: '-4' is not a non-negative number");
  EXPECT_EQ(message("[gpu]\nmemory_gb = lots\n"),
            "c.ini line 2: 'lots' is not a non-negative number");
  // The file's text is shown with control characters escaped and cut short, so the error stays
  // one line (found by tests/fuzz/fuzz_cluster_file.cpp: a carriage return split it).
  EXPECT_EQ(message("gpu\rs = 3\n"), "c.ini line 1: unknown key 'gpu\\x0ds'");
  EXPECT_EQ(message("[gpu]\nmemory_gb = " + std::string(1000, '9') + "x\n"),
            "c.ini line 2: '" + std::string(80, '9') + "...' is not a non-negative number");
  std::string escapes;
  for (int i = 0; i < 20; ++i) escapes += "\\x01";  // the shown text is bounded, not the read
  EXPECT_EQ(message("gpu" + std::string(200, '\x01') + " = 3\n"),
            "c.ini line 1: unknown key 'gpu" + escapes + "...'");
}

// A pass scale is a curve by micro-batch size, or one number for all of them.
TEST(ClusterFile, PassScalesAreCurvesOrOneNumber) {
  const Cluster c = parse_cluster_file(
      "base = dgx-h100\n[cpu]\ncores = 2\nforward_scale = 1.5\nbackward_weight_scale = 1:1.2, "
      "16:1.1\n",
      "c.ini");
  EXPECT_DOUBLE_EQ(CpuModel::scale_at(c.cpu.forward_scale, 1), 1.5);
  EXPECT_DOUBLE_EQ(CpuModel::scale_at(c.cpu.forward_scale, 16), 1.5);
  EXPECT_DOUBLE_EQ(CpuModel::scale_at(c.cpu.backward_weight_scale, 0.5), 1.2);
  EXPECT_NEAR(CpuModel::scale_at(c.cpu.backward_weight_scale, 4), 1.15, 1e-12);
  EXPECT_DOUBLE_EQ(CpuModel::scale_at(c.cpu.backward_input_scale, 4), 1);
  EXPECT_THROW(parse_cluster_file("base = dgx-h100\n[cpu]\nforward_scale = 0\n", "c.ini"), Error);
  EXPECT_THROW(parse_cluster_file("base = dgx-h100\n[cpu]\nforward_scale = 4:1, 2:1\n", "c.ini"),
               Error);
  // A malformed point is named with the form a pass scale's points take.
  try {
    parse_cluster_file("base = dgx-h100\n[cpu]\nforward_scale = 1-1.3, 2:1\n", "c.ini");
    ADD_FAILURE() << "a malformed point was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not MICROBATCH:SCALE"), std::string::npos) << e.what();
  }
}

// The cost of taking turns on a core: 1 at a share of 1, linear in log(share) from there to the
// measured points and held beyond, then in log(micro-batch) between the measured sizes.
TEST(ClusterFile, SharingScaleInterpolatesByShareThenMicroBatch) {
  const Cluster c = parse_cluster_file(
      "base = dgx-h100\n[cpu]\ncores = 2\nsharing_scale = 1x2:1.2, 1x8:1.4, 4x2:1.1, 4x8:1.1\n",
      "c.ini");
  EXPECT_DOUBLE_EQ(c.cpu.sharing_at(1, 1), 1);
  EXPECT_DOUBLE_EQ(c.cpu.sharing_at(0.5, 4), 1);
  EXPECT_NEAR(c.cpu.sharing_at(std::sqrt(2.0), 1), 1.1, 1e-12);  // halfway from 1 to 2 in log
  EXPECT_NEAR(c.cpu.sharing_at(2, 1), 1.2, 1e-12);
  EXPECT_NEAR(c.cpu.sharing_at(4, 1), 1.3, 1e-12);
  EXPECT_NEAR(c.cpu.sharing_at(16, 1), 1.4, 1e-12);     // held beyond the largest share
  EXPECT_NEAR(c.cpu.sharing_at(8, 2), 1.25, 1e-12);     // halfway from micro-batch 1 to 4 in log
  EXPECT_NEAR(c.cpu.sharing_at(8, 16), 1.1, 1e-12);     // held beyond the largest micro-batch
  EXPECT_DOUBLE_EQ(Cluster{}.cpu.sharing_at(8, 1), 1);  // none measured
  for (const char* bad : {"sharing_scale = 2:1.2\n", "sharing_scale = 1x1:1.2\n",
                          "sharing_scale = 1x2:0\n", "sharing_scale = 1x4:1.2, 1x2:1.1\n",
                          "sharing_scale = 4x2:1.2, 1x2:1.1\n", "sharing_scale = 1xa:1.2\n"})
    EXPECT_THROW(parse_cluster_file(std::string("base = dgx-h100\n[cpu]\n") + bad, "c.ini"), Error)
        << bad;
}

// The cost of meeting while taking turns: 0 at a share of 1 (and with none measured), linear in
// log(share) from there to the measured points and held beyond, then in log(micro-batch); a
// measured 0 is a value, a negative one an error.
TEST(ClusterFile, TurnSecondsRiseFromZeroAtOneRankACore) {
  const Cluster c = parse_cluster_file(
      "base = dgx-h100\n[cpu]\ncores = 2\nturn_seconds = 1x2:40e-6, 1x8:20e-6, 4x2:0, 4x8:60e-6\n",
      "c.ini");
  EXPECT_DOUBLE_EQ(c.cpu.turn_at(1, 1), 0);
  EXPECT_DOUBLE_EQ(c.cpu.turn_at(0.5, 4), 0);
  EXPECT_NEAR(c.cpu.turn_at(std::sqrt(2.0), 1), 20e-6, 1e-15);  // halfway from 1 to 2 in log
  EXPECT_NEAR(c.cpu.turn_at(4, 1), 30e-6, 1e-15);
  EXPECT_NEAR(c.cpu.turn_at(16, 1), 20e-6, 1e-15);  // held beyond the largest share
  EXPECT_NEAR(c.cpu.turn_at(2, 4), 0, 1e-15);
  EXPECT_NEAR(c.cpu.turn_at(8, 2), 40e-6, 1e-15);    // halfway from micro-batch 1 to 4 in log
  EXPECT_DOUBLE_EQ(Cluster{}.cpu.turn_at(8, 1), 0);  // none measured
  const Cluster back = parse_cluster_file(cluster_file_text(c), "c.ini");
  ASSERT_EQ(back.cpu.turn_seconds.size(), 4u);
  for (double share : {1.5, 2.0, 5.0, 8.0})
    for (double mb : {1.0, 2.0, 4.0})
      EXPECT_NEAR(back.cpu.turn_at(share, mb), c.cpu.turn_at(share, mb), 1e-12);
  for (const char* bad : {"turn_seconds = 2:1e-5\n", "turn_seconds = 1x1:1e-5\n",
                          "turn_seconds = 1x2:-1e-6\n", "turn_seconds = 1x4:1e-5, 1x2:1e-5\n"})
    EXPECT_THROW(parse_cluster_file(std::string("base = dgx-h100\n[cpu]\n") + bad, "c.ini"), Error)
        << bad;
}

// The rounds of Open MPI's nonblocking collectives are libnbc_seconds' latencies.
TEST(LinkModel, LibnbcRoundsAreItsLatencies) {
  LinkModel link;
  link.latency = 1e-6;
  link.bandwidth = 1e30;  // latency alone
  for (Collective op : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather})
    for (int ranks : {1, 2, 3, 4, 8})
      EXPECT_NEAR(libnbc_seconds(link, op, 1024, ranks), libnbc_rounds(op, ranks) * 1e-6, 1e-15)
          << static_cast<int>(op) << " over " << ranks;
  EXPECT_EQ(libnbc_rounds(Collective::kReduceScatter, 4), 5);  // binomial reduce, 3 sends
}

// The stage's size: linear in log(layers) between the measured points and held beyond them (no
// anchor at 1 layer), then in log(micro-batch); each malformed line named with its form.
TEST(ClusterFile, StageScaleInterpolatesByLayersThenMicroBatch) {
  const Cluster c = parse_cluster_file(
      "base = dgx-h100\n[cpu]\ncores = 2\nstage_scale = 1x1:0.8, 1x4:1, 4x1:0.9, 4x4:1\n", "c.ini");
  EXPECT_NEAR(c.cpu.stage_at(1, 1), 0.8, 1e-12);
  EXPECT_NEAR(c.cpu.stage_at(2, 1), 0.9, 1e-12);   // halfway from 1 to 4 layers in log
  EXPECT_NEAR(c.cpu.stage_at(24, 1), 1, 1e-12);    // held beyond the whole calibrated model
  EXPECT_NEAR(c.cpu.stage_at(1, 2), 0.85, 1e-12);  // halfway from micro-batch 1 to 4 in log
  EXPECT_NEAR(c.cpu.stage_at(2, 16), 0.95, 1e-12);
  EXPECT_DOUBLE_EQ(Cluster{}.cpu.stage_at(1, 1), 1);  // none measured
  for (const char* bad :
       {"stage_scale = 2:1.2\n", "stage_scale = 1x0.5:0.9\n", "stage_scale = 1x2:0\n",
        "stage_scale = 1x4:1, 1x2:0.9\n", "stage_scale = 0x2:0.9\n", "stage_scale = 1xa:0.9\n"})
    EXPECT_THROW(parse_cluster_file(std::string("base = dgx-h100\n[cpu]\n") + bad, "c.ini"), Error)
        << bad;
  try {
    parse_cluster_file("base = dgx-h100\n[cpu]\nstage_scale = 1-2:0.9\n", "c.ini");
    ADD_FAILURE() << "a malformed stage point was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stage point '1-2:0.9' is not MICROBATCHxLAYERS:SCALE"),
              std::string::npos)
        << e.what();
  }
}

// plan --calibrate writes cluster_file_text; the planner must read back the same figures,
// the CPU section and the GEMM curve included.
TEST(ClusterFile, WrittenTextReadsBackTheSameCluster) {
  Cluster c = cluster_preset("dgx-h100");
  c.gpu.gemm_curve = {{1e5, 0.25}, {1e8, 1.0}};
  c.cpu.cores = 2;
  c.cpu.forward_scale = {{1, 1.5}, {4, 1.25}};
  c.cpu.sharing_scale = {{1, 2, 1.25}, {1, 8, 1.125}, {4, 2, 1.0625}};
  c.cpu.stage_scale = {{1, 1, 0.875}, {1, 4, 1}, {16, 2, 0.9375}};
  c.inter_node.burst = 62.5e3;
  c.inter_node.eager_bytes = 65.472e3;
  c.inter_node.one_way_curve = {{4e3, 5e6}, {1e6, 6e6}};
  const Cluster back = parse_cluster_file(cluster_file_text(c), "c.ini");
  EXPECT_EQ(back.cpu.cores, 2);
  EXPECT_NEAR(CpuModel::scale_at(back.cpu.forward_scale, 1), 1.5, 1e-9);
  EXPECT_NEAR(CpuModel::scale_at(back.cpu.forward_scale, 16), 1.25, 1e-9);
  EXPECT_NEAR(CpuModel::scale_at(back.cpu.forward_scale, 2), 1.375, 1e-9);  // halfway in log
  EXPECT_DOUBLE_EQ(CpuModel::scale_at(back.cpu.backward_input_scale, 3), 1);
  ASSERT_EQ(back.cpu.sharing_scale.size(), 3u);
  for (double share : {1.5, 2.0, 5.0, 8.0})
    for (double mb : {1.0, 2.0, 4.0})
      EXPECT_NEAR(back.cpu.sharing_at(share, mb), c.cpu.sharing_at(share, mb), 1e-9);
  ASSERT_EQ(back.cpu.stage_scale.size(), 3u);
  for (double layers : {1.0, 2.0, 3.0, 24.0})
    for (double mb : {1.0, 4.0, 16.0})
      EXPECT_NEAR(back.cpu.stage_at(layers, mb), c.cpu.stage_at(layers, mb), 1e-9);
  EXPECT_NEAR(back.inter_node.burst, 62.5e3, 1e-6);
  EXPECT_NEAR(back.inter_node.eager_bytes, 65.472e3, 1e-6);
  EXPECT_DOUBLE_EQ(back.intra_node.eager_bytes, 0);
  EXPECT_NEAR(back.inter_node.one_way_bandwidth(1e6), 6e6, 1e-3);
  EXPECT_NEAR(back.intra_node.one_way_bandwidth(1e9), back.intra_node.bus_bandwidth(1e9), 1e-3);
  EXPECT_DOUBLE_EQ(back.intra_node.burst, 0);
  EXPECT_NEAR(back.gpu.gemm_efficiency_at(1e5), 0.25, 1e-9);
  EXPECT_NEAR(back.gpu.gemm_efficiency_at(1e8), 1.0, 1e-9);
  EXPECT_NEAR(back.gpu.peak_bf16, c.gpu.peak_bf16, c.gpu.peak_bf16 * 1e-5);
  EXPECT_NEAR(back.gpu.attention_kernel_peak(), 67e12, 67e12 * 1e-5);
  EXPECT_NEAR(back.gpu.gemm_efficiency, c.gpu.gemm_efficiency, 1e-5);
  EXPECT_NEAR(back.intra_node.bus_bandwidth(1e9), c.intra_node.bus_bandwidth(1e9),
              c.intra_node.bus_bandwidth(1e9) * 1e-5);
}

}  // namespace
}  // namespace gpt
