// What a transfer costs on a cluster's links: a collective's size and group turned into seconds
// (ring and tree costs: latency per step plus bytes over bus bandwidth, as nccl-tests defines bus
// bandwidth, less what a shaped link's burst passes at once), a point-to-point message, and which
// link a group of ranks uses where the job places them.
#pragma once

#include "parallel/planner/cluster.h"

namespace gpt {

enum class Collective { kAllReduce, kAllGather, kReduceScatter };

// Seconds of one collective over `ranks` GPUs on `link`; `bytes` is the whole buffer (the
// all-reduce's, the all-gather's output, the reduce-scatter's input), as nccl-tests sizes it.
// Ring: all-reduce 2(n-1) steps moving 2(n-1)/n of the buffer, all-gather and reduce-scatter
// n-1 steps moving (n-1)/n of it; an all-reduce also has the tree's 2 log2(n) steps at the same
// bus bandwidth, and takes the cheaper. Zero for one rank. `idle`: seconds the link was idle
// before (the compute since the last transfer), which buys back up to its burst (burst_credit).
double collective_seconds(const LinkModel& link, Collective op, double bytes, int ranks,
                          double idle = 0);
// One point-to-point message of `bytes` (one way: the one-way curve where there is one), after
// `idle` seconds.
double p2p_seconds(const LinkModel& link, double bytes, double idle = 0);

// The link a group of `ranks` GPUs, `stride` global ranks apart, uses on `cluster`, and its
// bus bandwidth model: inside a node the intra-node link; across nodes the inter-node link, whose
// per-GPU bandwidth the group's members on one node add up (each drives its own NIC), at most
// the intra-node link's. On a CPU cluster a node's ranks share one network link, of which the
// calibrated per-GPU figure is the share when all gpus_per_node of them talk at once:
// `concurrent` > 0 says how many of the node's ranks cross nodes at the same time as this group
// (its members included), who then split the whole link.
LinkModel group_link(const Cluster& cluster, int ranks, int stride,
                     const RankPlacement& placement = {}, int concurrent = 0);

// The most ranks `world` puts on one node under `placement`: the ranks that share one node's
// cores on a CPU cluster.
int ranks_per_node(const Cluster& cluster, int world, const RankPlacement& placement);

}  // namespace gpt
