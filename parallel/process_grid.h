// The 3-D process grid (docs/DESIGN.md): world = tp * dp * pp with
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank)
// tp fastest-varying (consecutive ranks of one node), then dp, then pp (stages across nodes).
// Worked example, 16 ranks at tp 4, pp 4 (dp 1): tp groups {0-3} {4-7} {8-11} {12-15},
// pp groups {0,4,8,12} {1,5,9,13} ..., embedding groups {0,12} {1,13} {2,14} {3,15}.
// The grid owns one communicator per group this rank belongs to; pass it by reference. Each
// records its operations in the grid's operation log, which the watchdog reads.
#pragma once

#include <memory>

#include <mpi.h>

#include "framework/backend.h"
#include "parallel/communicator.h"
#include "parallel/device_communicator.h"
#include "parallel/operation_log.h"
#include "parallel/tracked_communicator.h"

namespace gpt {

struct GridCoordinates {
  int tp_rank = 0, dp_rank = 0, stage = 0;
};

struct GridShape {
  int tp = 1;
  int dp = 1;
  int pp = 1;
  int world() const { return tp * dp * pp; }
  // The grid order, both ways: the one place the rank formula lives.
  GridCoordinates coordinates_of(int rank) const {
    return {rank % tp, rank / tp % dp, rank / (tp * dp)};
  }
  int rank_of(const GridCoordinates& c) const {
    return c.tp_rank + tp * (c.dp_rank + dp * c.stage);
  }
};

struct GridOptions {
  GridShape shape;
  // Simulated node size for the "tp must not span nodes" rule; 0 = detect with
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
  int ranks_per_node = 0;
  bool allow_tp_across_nodes = false;
};

class ProcessGrid {
 public:
  // Collective over `world`. Throws a one-line gpt::Error (identically on every rank) when the
  // shape does not match the world size or a tp group would span two nodes.
  ProcessGrid(MPI_Comm world, const GridOptions& options);

  const GridShape& shape() const { return shape_; }
  int global_rank() const { return global_rank_; }
  int tp_rank() const { return tp_rank_; }
  int dp_rank() const { return dp_rank_; }
  int stage() const { return stage_; }
  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ == shape_.pp - 1; }
  int ranks_per_node() const { return ranks_per_node_; }
  int local_rank() const { return local_rank_; }  // rank within its node

  // Global rank of the grid point (tp_rank, dp_rank, stage).
  int rank_of(int tp_rank, int dp_rank, int stage) const;

  Communicator& tp() { return *tp_; }
  Communicator& dp() { return *dp_; }
  Communicator& pp() { return *pp_; }
  Communicator& world() { return *world_; }
  // Collective over world: the sum over dp replicas and stages of a value that the tp ranks of a
  // group hold alike (the last stage's token losses), counted once per tp group.
  double sum_tp_replicated(double value);

  // First and last stage at this rank's (tp, dp) coordinates; null on the other stages and
  // when pp == 1 (the two copies of wte are then one).
  Communicator* embedding() { return embedding_.get(); }

  // Collective: the tp, dp, pp and embedding groups move device buffers of `backend` over
  // `transport` from now on (world stays MPI: it only carries host values). Every rank builds
  // them in the same order, as NCCL's initialisation needs.
  void use_device_communicators(Backend& backend, DeviceTransport transport);

  // Every operation of the grid's communicators; others add theirs (a checkpoint write) on
  // channel_of_world().
  OperationLog& operations() { return *operations_; }
  int channel_of_world() { return world_channel_; }

 private:
  GridShape shape_;
  int global_rank_ = 0, tp_rank_ = 0, dp_rank_ = 0, stage_ = 0;
  int ranks_per_node_ = 1, local_rank_ = 0;
  std::unique_ptr<OperationLog> operations_;  // before the communicators that record in it
  std::unique_ptr<TrackedCommunicator> tp_, dp_, pp_, world_, embedding_;
  int world_channel_ = -1;
};

}  // namespace gpt
