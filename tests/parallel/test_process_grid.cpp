// The process grid at 1, 2, 4, 8 and 16 ranks: coordinates and group membership for every
// factorisation of the world size, the 16-rank tp 4 x pp 4 example of process_grid.h, and the
// layout errors, which must be thrown alike on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "framework/check.h"
#include "parallel/process_grid.h"
#include "tests/test_util.h"

namespace gpt {
namespace {

// The global ranks of a group's members, in the group's rank order.
std::vector<int> members(Communicator& comm) {
  const float me = static_cast<float>(world_rank());
  std::vector<float> all(static_cast<size_t>(comm.size()));
  comm.all_gather(&me, all.data(), 1);
  return std::vector<int>(all.begin(), all.end());
}

std::vector<GridShape> factorisations(int world) {
  std::vector<GridShape> shapes;
  for (int tp = 1; tp <= world; ++tp)
    for (int dp = 1; tp * dp <= world; ++dp)
      if (world % (tp * dp) == 0) shapes.push_back({tp, dp, world / (tp * dp)});
  return shapes;
}

// The error message of constructing the grid, or "" when it succeeds; checks that every rank
// got the same outcome (a rank that went on alone would hang the next collective).
std::string construction_error(const GridOptions& options) {
  std::string message;
  try {
    ProcessGrid grid(MPI_COMM_WORLD, options);
  } catch (const Error& e) {
    message = e.what();
  }
  const int threw = message.empty() ? 0 : 1;
  int all_threw = 0, any_threw = 0;
  MPI_Allreduce(&threw, &all_threw, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&threw, &any_threw, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(all_threw, any_threw) << "some ranks threw and some did not: " << message;
  return message;
}

// Options for `shape` on simulated nodes of ranks_per_node consecutive ranks each.
GridOptions simulated_nodes(GridShape shape, int ranks_per_node) {
  GridOptions options;
  options.shape = shape;
  options.ranks_per_node = ranks_per_node;
  return options;
}

TEST(ProcessGrid, EveryFactorisation) {
  const int world = world_size(), rank = world_rank();
  for (const GridShape& shape : factorisations(world)) {
    SCOPED_TRACE(GPT_MSG("tp " << shape.tp << " dp " << shape.dp << " pp " << shape.pp));
    GridOptions options;
    options.shape = shape;
    ProcessGrid grid(MPI_COMM_WORLD, options);
    const int t = grid.tp_rank(), d = grid.dp_rank(), s = grid.stage();
    EXPECT_EQ(grid.global_rank(), rank);
    EXPECT_EQ(t + shape.tp * (d + shape.dp * s), rank);
    EXPECT_TRUE(t >= 0 && t < shape.tp && d >= 0 && d < shape.dp && s >= 0 && s < shape.pp);
    EXPECT_EQ(grid.rank_of(t, d, s), rank);
    EXPECT_EQ(grid.is_first_stage(), s == 0);
    EXPECT_EQ(grid.is_last_stage(), s == shape.pp - 1);

    // rank_of is the inverse of the coordinates everywhere, not only here.
    std::vector<bool> seen(static_cast<size_t>(world), false);
    for (int ss = 0; ss < shape.pp; ++ss)
      for (int dd = 0; dd < shape.dp; ++dd)
        for (int tt = 0; tt < shape.tp; ++tt) {
          int r = grid.rank_of(tt, dd, ss);
          ASSERT_TRUE(r >= 0 && r < world);
          EXPECT_FALSE(seen[static_cast<size_t>(r)]);
          seen[static_cast<size_t>(r)] = true;
          EXPECT_EQ(r % shape.tp, tt);
          EXPECT_EQ(r / shape.tp % shape.dp, dd);
          EXPECT_EQ(r / (shape.tp * shape.dp), ss);
        }

    EXPECT_EQ(grid.tp().name(), "tp");
    EXPECT_EQ(grid.dp().name(), "dp");
    EXPECT_EQ(grid.pp().name(), "pp");
    EXPECT_EQ(grid.world().name(), "world");
    EXPECT_EQ(grid.tp().size(), shape.tp);
    EXPECT_EQ(grid.dp().size(), shape.dp);
    EXPECT_EQ(grid.pp().size(), shape.pp);
    EXPECT_EQ(grid.world().size(), world);
    EXPECT_EQ(grid.tp().rank(), t);
    EXPECT_EQ(grid.dp().rank(), d);
    EXPECT_EQ(grid.pp().rank(), s);
    EXPECT_EQ(grid.world().rank(), rank);

    std::vector<int> tp_expected, dp_expected, pp_expected, world_expected;
    for (int j = 0; j < shape.tp; ++j) tp_expected.push_back(grid.rank_of(j, d, s));
    for (int j = 0; j < shape.dp; ++j) dp_expected.push_back(grid.rank_of(t, j, s));
    for (int j = 0; j < shape.pp; ++j) pp_expected.push_back(grid.rank_of(t, d, j));
    for (int j = 0; j < world; ++j) world_expected.push_back(j);
    EXPECT_EQ(members(grid.tp()), tp_expected);
    EXPECT_EQ(members(grid.dp()), dp_expected);
    EXPECT_EQ(members(grid.pp()), pp_expected);
    EXPECT_EQ(members(grid.world()), world_expected);

    Communicator* embedding = grid.embedding();
    if (shape.pp == 1 || (!grid.is_first_stage() && !grid.is_last_stage())) {
      EXPECT_EQ(embedding, nullptr);
    } else {
      ASSERT_NE(embedding, nullptr);
      EXPECT_EQ(embedding->name(), "embedding");
      EXPECT_EQ(embedding->size(), 2);
      EXPECT_EQ(embedding->rank(), grid.is_first_stage() ? 0 : 1);
      EXPECT_EQ(members(*embedding),
                (std::vector<int>{grid.rank_of(t, d, 0), grid.rank_of(t, d, shape.pp - 1)}));
    }
  }
}

TEST(ProcessGrid, SixteenRanksAtTp4Pp4) {
  if (world_size() != 16) GTEST_SKIP() << "the worked example needs 16 ranks";
  GridOptions options;
  options.shape = {4, 1, 4};
  ProcessGrid grid(MPI_COMM_WORLD, options);
  const int r = world_rank();
  const int first_of_tp = r / 4 * 4;
  EXPECT_EQ(members(grid.tp()),
            (std::vector<int>{first_of_tp, first_of_tp + 1, first_of_tp + 2, first_of_tp + 3}));
  EXPECT_EQ(members(grid.pp()), (std::vector<int>{r % 4, r % 4 + 4, r % 4 + 8, r % 4 + 12}));
  EXPECT_EQ(members(grid.dp()), (std::vector<int>{r}));
  EXPECT_EQ(grid.stage(), r / 4);
  if (r < 4 || r >= 12) {
    ASSERT_NE(grid.embedding(), nullptr);
    EXPECT_EQ(members(*grid.embedding()), (std::vector<int>{r % 4, r % 4 + 12}));
  } else {
    EXPECT_EQ(grid.embedding(), nullptr);
  }
}

TEST(ProcessGrid, GroupsReduceIndependently) {
  // An all-reduce inside each group sums exactly its members: groups do not leak into each other.
  const int world = world_size();
  for (const GridShape& shape : factorisations(world)) {
    GridOptions options;
    options.shape = shape;
    ProcessGrid grid(MPI_COMM_WORLD, options);
    float x = static_cast<float>(grid.global_rank());
    grid.tp().all_reduce(&x, 1, ReduceOp::kSum);
    float expected = 0;
    for (int j = 0; j < shape.tp; ++j)
      expected += static_cast<float>(grid.rank_of(j, grid.dp_rank(), grid.stage()));
    EXPECT_EQ(x, expected);
  }
}

TEST(ProcessGrid, MismatchedWorldSizeThrowsOnEveryRank) {
  const int world = world_size();
  GridOptions options;
  options.shape = world == 4 ? GridShape{2, 2, 2} : GridShape{2, 1, 2};
  const std::string expected =
      GPT_MSG("--tp 2 x --dp " << options.shape.dp << " x --pp 2 = " << options.shape.world()
                               << " ranks, but the job has " << world);
  EXPECT_EQ(construction_error(options), expected);
}

TEST(ProcessGrid, NonPositiveSizesThrow) {
  GridOptions options;
  options.shape = {0, 1, world_size()};
  EXPECT_NE(construction_error(options).find("must each be at least 1"), std::string::npos);
  options.shape = {world_size(), -1, -1};
  EXPECT_NE(construction_error(options).find("must each be at least 1"), std::string::npos);
}

TEST(ProcessGrid, TpAcrossSimulatedNodesThrowsOnEveryRank) {
  const int world = world_size();
  if (world < 4) GTEST_SKIP() << "needs two nodes of two ranks";
  GridOptions options = simulated_nodes({4, world / 4, 1}, 2);
  EXPECT_EQ(construction_error(options),
            "--tp 4 spans two nodes (ranks per node: 2); use --tp <= 2 or "
            "--allow-tp-across-nodes");

  options.allow_tp_across_nodes = true;
  EXPECT_EQ(construction_error(options), "");
  ProcessGrid grid(MPI_COMM_WORLD, options);
  EXPECT_EQ(grid.ranks_per_node(), 2);
  EXPECT_EQ(grid.local_rank(), world_rank() % 2);
  EXPECT_EQ(grid.tp().size(), 4);
}

TEST(ProcessGrid, TpWithinSimulatedNodesIsAccepted) {
  const int world = world_size();
  if (world < 4) GTEST_SKIP() << "needs two nodes of two ranks";
  GridOptions options = simulated_nodes({2, 1, world / 2}, 2);
  ProcessGrid grid(MPI_COMM_WORLD, options);
  EXPECT_EQ(grid.local_rank(), world_rank() % 2);
  EXPECT_EQ(grid.ranks_per_node(), 2);
  options.ranks_per_node = 4;
  options.shape = {world >= 8 ? 4 : 2, 1, world / (world >= 8 ? 4 : 2)};
  ProcessGrid wider(MPI_COMM_WORLD, options);
  EXPECT_EQ(wider.local_rank(), world_rank() % 4);
}

TEST(ProcessGrid, UnevenSimulatedNodesNameTheRange) {
  const int world = world_size();
  if (world < 4) GTEST_SKIP() << "needs nodes of three and of one rank";
  // Nodes {0,1,2} {3,4,5} ...: the tp group {2,3} straddles the first boundary.
  const GridOptions options = simulated_nodes({2, 1, world / 2}, 3);
  const std::string message = construction_error(options);
  EXPECT_NE(message.find("--tp 2 spans two nodes (ranks per node: "), std::string::npos) << message;
  EXPECT_NE(message.find("use --tp <= 1 or --allow-tp-across-nodes"), std::string::npos) << message;
}

TEST(ProcessGrid, DetectsTheRealNode) {
  // ctest runs every rank on this one machine: one node holding the whole job.
  const int world = world_size();
  GridOptions options;
  options.shape = {world, 1, 1};
  ProcessGrid grid(MPI_COMM_WORLD, options);
  EXPECT_EQ(grid.ranks_per_node(), world);
  EXPECT_EQ(grid.local_rank(), world_rank());
}

TEST(ProcessGrid, RankOfRejectsPointsOutsideTheGrid) {
  GridOptions options;
  options.shape = {world_size(), 1, 1};
  ProcessGrid grid(MPI_COMM_WORLD, options);
  EXPECT_THROW(grid.rank_of(world_size(), 0, 0), Error);
  EXPECT_THROW(grid.rank_of(0, 1, 0), Error);
  EXPECT_THROW(grid.rank_of(0, 0, -1), Error);
}

}  // namespace
}  // namespace gpt
