// The 3-D process grid: validates the shape against the job, places every rank on its node, and
// splits the world into the tp, dp, pp and embedding groups. Every check runs on data all ranks
// hold alike (the shape, the gathered node of every rank), so a bad layout throws the same
// one-line error on every rank and no rank is left inside a collective.
#include "parallel/process_grid.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "parallel/mpi_communicator.h"

namespace gpt {

namespace {

// The node of every global rank, numbered by its lowest global rank.
std::vector<int> node_of_every_rank(MPI_Comm world, int rank, int world_size,
                                    int simulated_ranks_per_node) {
  std::vector<int> node(static_cast<size_t>(world_size));
  if (simulated_ranks_per_node > 0) {
    for (int r = 0; r < world_size; ++r)
      node[static_cast<size_t>(r)] = r / simulated_ranks_per_node * simulated_ranks_per_node;
    return node;
  }
  OwnedMpiComm shared;
  GPT_MPI_CHECK(
      MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, shared.out()));
  int node_id = rank;
  GPT_MPI_CHECK(MPI_Allreduce(&rank, &node_id, 1, MPI_INT, MPI_MIN, shared.get()));
  GPT_MPI_CHECK(MPI_Allgather(&node_id, 1, MPI_INT, node.data(), 1, MPI_INT, world));
  return node;
}

// Whether every group of `tp` consecutive ranks lies on one node.
bool tp_fits_nodes(const std::vector<int>& node, int tp) {
  for (size_t first = 0; first < node.size(); first += static_cast<size_t>(tp))
    for (size_t r = first; r < first + static_cast<size_t>(tp) && r < node.size(); ++r)
      if (node[r] != node[first]) return false;
  return true;
}

std::string spelled_count(int n) {
  return n == 2 ? "two" : std::to_string(n);
}

// The one-line error for a tp group across nodes, built from the gathered node table alone so
// that every rank phrases it the same.
std::string tp_across_nodes_message(const std::vector<int>& node, int tp) {
  const int world = static_cast<int>(node.size());
  int nodes_spanned = 1;
  for (int first = 0; first < world && nodes_spanned == 1; first += tp) {
    std::vector<int> ids(node.begin() + first, node.begin() + std::min(first + tp, world));
    std::sort(ids.begin(), ids.end());
    nodes_spanned = static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
  }
  std::vector<int> sizes;
  for (int r = 0; r < world; ++r)
    if (node[static_cast<size_t>(r)] == r)
      sizes.push_back(static_cast<int>(std::count(node.begin(), node.end(), r)));
  auto [smallest, largest] = std::minmax_element(sizes.begin(), sizes.end());
  std::string per_node = std::to_string(*smallest);
  if (*largest != *smallest) per_node += " to " + std::to_string(*largest);
  // The largest tp that would fit: a hint, since dp or pp must then change to fill the job.
  int fits = 1;
  for (int t = tp - 1; t > 1 && fits == 1; --t)
    if (world % t == 0 && tp_fits_nodes(node, t)) fits = t;
  return GPT_MSG("--tp " << tp << " spans " << spelled_count(nodes_spanned)
                         << " nodes (ranks per node: " << per_node << "); use --tp <= " << fits
                         << " or --allow-tp-across-nodes");
}

// A communicator over the ranks sharing `color`, ordered by `key` (so its rank is the key).
std::unique_ptr<TrackedCommunicator> split(MPI_Comm world, int color, int key, const char* name,
                                           OperationLog& log) {
  OwnedMpiComm part;
  GPT_MPI_CHECK(MPI_Comm_split(world, color, key, part.out()));
  if (part.get() == MPI_COMM_NULL) return nullptr;
  return std::make_unique<TrackedCommunicator>(make_mpi_communicator(part.get(), name), log);
}

// The same group's communicator over another transport, still recorded.
std::unique_ptr<TrackedCommunicator> on_device(std::unique_ptr<TrackedCommunicator> tracked,
                                               Backend& backend, DeviceTransport transport,
                                               OperationLog& log) {
  return std::make_unique<TrackedCommunicator>(
      make_device_communicator(tracked->release(), backend, transport), log);
}

}  // namespace

ProcessGrid::ProcessGrid(MPI_Comm world, const GridOptions& options)
    : shape_(options.shape), operations_(std::make_unique<OperationLog>()) {
  int world_size = 0;
  GPT_MPI_CHECK(MPI_Comm_rank(world, &global_rank_));
  GPT_MPI_CHECK(MPI_Comm_size(world, &world_size));
  const int tp = shape_.tp, dp = shape_.dp, pp = shape_.pp;
  GPT_INPUT_CHECK(tp >= 1 && dp >= 1 && pp >= 1, "--tp " << tp << ", --dp " << dp << " and --pp "
                                                         << pp << " must each be at least 1");
  GPT_INPUT_CHECK(shape_.world() == world_size,
                  "--tp " << tp << " x --dp " << dp << " x --pp " << pp << " = " << shape_.world()
                          << " ranks, but the job has " << world_size);
  GPT_INPUT_CHECK(options.ranks_per_node >= 0,
                  "ranks per node " << options.ranks_per_node << " must not be negative");

  const GridCoordinates me = shape_.coordinates_of(global_rank_);
  tp_rank_ = me.tp_rank;
  dp_rank_ = me.dp_rank;
  stage_ = me.stage;

  const std::vector<int> node =
      node_of_every_rank(world, global_rank_, world_size, options.ranks_per_node);
  const int my_node = node[static_cast<size_t>(global_rank_)];
  ranks_per_node_ = static_cast<int>(std::count(node.begin(), node.end(), my_node));
  local_rank_ = static_cast<int>(std::count(node.begin(), node.begin() + global_rank_, my_node));
  GPT_INPUT_CHECK(options.allow_tp_across_nodes || tp_fits_nodes(node, tp),
                  tp_across_nodes_message(node, tp));

  // Every rank takes part in every split, in the same order; the coordinate is the key, so a
  // group's communicator rank is the coordinate along its axis.
  OperationLog& log = *operations_;
  tp_ = split(world, dp_rank_ + dp * stage_, tp_rank_, "tp", log);
  dp_ = split(world, tp_rank_ + tp * stage_, dp_rank_, "dp", log);
  pp_ = split(world, tp_rank_ + tp * dp_rank_, stage_, "pp", log);
  world_ = std::make_unique<TrackedCommunicator>(make_mpi_communicator(world, "world"), log);
  std::vector<int> everyone(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) everyone[static_cast<size_t>(r)] = r;
  world_channel_ = log.channel(channel_name("world", everyone), everyone);
  if (pp > 1) {
    const bool holds_wte = is_first_stage() || is_last_stage();
    embedding_ = split(world, holds_wte ? tp_rank_ + tp * dp_rank_ : MPI_UNDEFINED, stage_,
                       "embedding", log);
  }
}

int ProcessGrid::rank_of(int tp_rank, int dp_rank, int stage) const {
  GPT_CHECK(tp_rank >= 0 && tp_rank < shape_.tp && dp_rank >= 0 && dp_rank < shape_.dp &&
                stage >= 0 && stage < shape_.pp,
            "grid point (tp " << tp_rank << ", dp " << dp_rank << ", stage " << stage
                              << ") outside the grid " << shape_.tp << " x " << shape_.dp << " x "
                              << shape_.pp);
  return shape_.rank_of({tp_rank, dp_rank, stage});
}

double ProcessGrid::sum_tp_replicated(double value) {
  double sum = tp_rank_ == 0 ? value : 0.0;
  world_->all_reduce(&sum, 1, ReduceOp::kSum);
  return sum;
}

void ProcessGrid::use_device_communicators(Backend& backend, DeviceTransport transport) {
  OperationLog& log = *operations_;
  tp_ = on_device(std::move(tp_), backend, transport, log);
  dp_ = on_device(std::move(dp_), backend, transport, log);
  pp_ = on_device(std::move(pp_), backend, transport, log);
  if (embedding_ != nullptr) embedding_ = on_device(std::move(embedding_), backend, transport, log);
}

}  // namespace gpt
