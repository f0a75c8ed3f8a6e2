// The link model (see link_model.h).
#include "parallel/planner/link_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "framework/check.h"

namespace gpt {
namespace {

// Seconds of a transfer's `wire` time (bus bytes over bandwidth) that a shaped link's bucket,
// refilled at the link's rate over `idle` seconds up to its burst, passes at once.
double burst_credit(const LinkModel& link, double bytes, double wire, double idle) {
  if (link.burst <= 0 || idle <= 0) return 0;
  return std::min({wire, idle, link.burst / link.bus_bandwidth(bytes)});
}

}  // namespace

double collective_seconds(const LinkModel& link, Collective op, double bytes, int ranks,
                          double idle) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks, share = (n - 1) / n, bw = link.bus_bandwidth(bytes);
  switch (op) {
    case Collective::kAllReduce: {
      const double ring = 2 * (n - 1) * link.latency;
      const double tree = 2 * std::ceil(std::log2(n)) * link.latency;
      const double wire = 2 * share * bytes / bw;
      return std::min(ring, tree) + wire - burst_credit(link, bytes, wire, idle);
    }
    case Collective::kAllGather:
    case Collective::kReduceScatter: {
      const double wire = share * bytes / bw;
      return (n - 1) * link.latency + wire - burst_credit(link, bytes, wire, idle);
    }
  }
  return 0;
}

double p2p_seconds(const LinkModel& link, double bytes, double idle) {
  if (bytes <= 0) return 0;
  const double wire = bytes / link.one_way_bandwidth(bytes);
  return link.latency + wire - burst_credit(link, bytes, wire, idle);
}

LinkModel group_link(const Cluster& cluster, int ranks, int stride, const RankPlacement& placement,
                     int concurrent) {
  const int g = cluster.gpus_per_node;
  if (ranks <= 1 || stride <= 0) return cluster.intra_node;  // no transfer between nodes
  int per_node = 0;  // the group's members on one node; 0 while it stays inside one
  if (placement.by_node && placement.nodes > 1) {
    // Members i * stride (plus the group's first rank) visit nodes i * stride mod nodes: as many
    // distinct nodes as nodes / gcd(stride, nodes), at most `ranks`.
    const int nodes_touched = std::min(ranks, placement.nodes / std::gcd(stride, placement.nodes));
    if (nodes_touched > 1) per_node = (ranks + nodes_touched - 1) / nodes_touched;
  } else {
    const int64_t span = static_cast<int64_t>(ranks - 1) * stride + 1;
    // Groups start at multiples of their block; a group stays in a node when its span does.
    if (!(span <= g && g % std::min<int64_t>(g, static_cast<int64_t>(ranks) * stride) == 0))
      per_node = std::max(1, std::min(ranks, g / std::max(1, stride)));
  }
  if (per_node == 0) return cluster.intra_node;
  LinkModel link = cluster.inter_node;
  link.crosses_nodes = true;
  // Each member on a node drives its own NIC, so their shares add, up to what NVLink carries.
  const double intra = cluster.intra_node.bus_bandwidth(1e12);
  double scale = per_node;
  if (cluster.cpu.active()) {
    // A CPU cluster's collectives are Open MPI's: its all-reduce halves and doubles with the
    // nearest partners first, so the data crossing between k nodes is 2(k-1)/k of the buffer a
    // node, where a ring (NCCL, the model's bus bytes) moves 2(n-1)/n over its crossing edge:
    // the link serves the n-rank collective as if (n-1)/n / ((k-1)/k) times faster. (Measured
    // with scripts/netns: tp 4 over 2 nodes moves the buffer once each way, not 1.5 times.)
    const int k = (ranks + per_node - 1) / per_node;
    scale *= ((ranks - 1.0) / ranks) / ((k - 1.0) / k);
    if (concurrent > 0)
      scale *= static_cast<double>(g) / std::max(concurrent, per_node);  // the node's one link
  }
  link.bandwidth = std::min(intra, link.bandwidth * scale);
  for (auto* curve : {&link.curve, &link.one_way_curve})
    for (auto& [size, bw] : *curve) bw = std::min(intra, bw * scale);
  link.burst *= scale;  // each member's share of the bucket, as of the bandwidth
  link.latency = std::max(cluster.intra_node.latency, link.latency);
  return link;
}

int ranks_per_node(const Cluster& cluster, int world, const RankPlacement& placement) {
  if (placement.by_node && placement.nodes > 1)
    return (world + placement.nodes - 1) / placement.nodes;
  return std::min(world, cluster.gpus_per_node);
}

}  // namespace gpt
