// The planner's core-sharing adapter: what ranks that share a CPU node's cores pay on top of the
// hardware pricing (docs/PLANNER.md, "Sharing the cores", "The stage's size", "Taking turns at a
// meeting", "Open MPI's nonblocking collectives"). It exists so that the cost model
// (cost_model.cpp) prices every pass and transfer as a GPU would run it, one rank a device, and
// hands the figures here once: on a calibrated CPU cluster (cluster.cpu.active()) this stretches
// them by the ranks' share of the cores and the measured scales, adds the turn each meeting of two
// ranks inside a node costs, and prices the dp buckets as Open MPI's libnbc runs them. On a GPU
// cluster it is the identity.
#pragma once

#include "framework/config.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/link_model.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

// The same collectives as Open MPI's nonblocking ones run them (coll/libnbc, which train's dp
// buckets use on the CPU backend; libnbc's nbc_iallreduce.c and nbc_ireduce_scatter_block.c): an
// in-place all-reduce is a binomial reduce to one rank and a binomial broadcast back, the whole
// buffer one way in each of 2 ceil(log2 n) rounds; a reduce-scatter is that binomial reduce,
// then the root sends each rank its block in turn; an all-gather is every rank sending its block
// to every other, as the ring moves it.
double libnbc_seconds(const LinkModel& link, Collective op, double bytes, int ranks);
// The rounds of libnbc_seconds' collective (its latencies): the messages a rank waits for, one
// at a time, each needing its sender to run.
int libnbc_rounds(Collective op, int ranks);

// One layout's ranks on one cluster's nodes. Ranks beyond a node's cores share them, each getting
// cores / (ranks on the node x threads) of one. Open MPI, seeing more ranks than slots, makes a
// waiting rank yield its core (mpi_yield_when_idle), so the node's work spreads over its cores
// (forced to spin instead, tp 4 on 2 cores ran 45 times slower here): every pass and every
// transfer the CPU drives (shared memory, inside a node) stretches by that share; a transfer
// across nodes is bound by the network and does not. The passes stretch further by the measured
// cost of taking turns (CpuModel::sharing_at), and each meeting of two ranks inside a node costs
// them the measured turn (CpuModel::turn_at). Default-constructed: the identity.
class CoreSharing {
 public:
  CoreSharing() = default;
  CoreSharing(const CpuModel& cpu, double share, double micro_batch, double stage_layers);

  // A pass's modelled compute seconds as the CPU runs it: times the measured scale of that pass
  // kind (kForward, kBackwardInput, kBackwardWeight) at the layout's micro-batch size, the stage's
  // scale for a rank holding the stage's layers, and the share with what turns on a core cost
  // beyond it.
  double stretch_pass(double seconds, ActionKind pass) const;
  // A chunk's three passes: stretch_pass on their compute, stretch_transfer on their exposed tp
  // communication (on `tp_link`).
  ChunkCosts stretch_chunk(ChunkCosts costs, const LinkModel& tp_link) const;
  // CPU work outside the passes (the optimizer step): the share alone.
  double stretch_work(double seconds) const { return share_ * seconds; }
  // A transfer the CPU drives on `link`: times the share inside a node, unchanged across nodes.
  double stretch_transfer(double seconds, const LinkModel& link) const {
    return (link.crosses_nodes ? 1 : share_) * seconds;
  }
  // `seconds` of an exchange on `link` plus the turns its `meetings` meetings of two ranks cost
  // them, before the transfer's stretch (a meeting: a blocking tp collective, a round of a dp or
  // step reduction, a pipeline message). Each needs both ranks run, past the turns of the others
  // on their cores (CpuModel::turn_seconds, measured at the tp collectives of a tp-2 pass at the
  // layout's micro-batch size). None across nodes (the network binds), on GPUs, or with a core a
  // rank.
  double meet(double seconds, const LinkModel& link, double meetings = 1) const {
    return seconds + meetings * (link.crosses_nodes ? 0 : turn_);
  }
  // A blocking exchange of `meetings` meetings on `link`: meet, then stretch_transfer.
  double exchange(double seconds, const LinkModel& link, double meetings = 1) const {
    return stretch_transfer(meet(seconds, link, meetings), link);
  }
  // A nonblocking collective of train's dp buckets over `ranks`: NCCL's ring on GPUs
  // (collective_seconds); on the CPU Open MPI's libnbc, a turn at each of its rounds, stretched.
  double nonblocking(const LinkModel& link, Collective op, double bytes, int ranks) const;

 private:
  const CpuModel* cpu_ = nullptr;  // null: a GPU cluster
  double share_ = 1, micro_batch_ = 1;
  double shared_stage_ = 1;  // share x sharing_at x stage_at: every pass's part but its kind's
  double turn_ = 0;          // seconds a meeting inside a node (turn_at)
};

// The sharing of `layout`'s ranks on `cluster` for `model`: the identity on a GPU cluster. The
// stage scale is taken at pipeline stage `stage`'s layers (all its chunks'), or at the model's
// layers over pp when `stage` is -1 (the step's work outside the passes).
CoreSharing core_sharing(const ModelConfig& model, const Cluster& cluster, const PlanLayout& layout,
                         int stage = -1);

}  // namespace gpt
