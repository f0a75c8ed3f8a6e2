// `plan --calibrate-turns` (see calibrate_turns.h). Each point's ranks keep running until every
// one of them has its iterations timed, so each was timed while all ran (as calibrate's shared
// passes are).
#include "launch/calibration/calibrate_turns.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/timer.h"
#include "launch/calibration/calibration_model.h"
#include "launch/calibration/sleeping_wait.h"
#include "parallel/planner/cluster_file.h"
#include "parallel/planner/cost_model.h"

namespace gpt {
namespace {

// The micro-batch sizes it is measured at, as the sharing scale's (plan_calibrate.cpp): the
// oversubscribed runs here take turns at micro-batches 1 to 4.
constexpr std::array<int64_t, 2> kTurnMicroBatches = {1, 4};
constexpr std::array<int, 3> kTurnShares = {2, 4, 8};
// Interleaved rounds, each point's median kept: the machine's speed drifts over seconds.
constexpr int kTurnRounds = 3;
// Each point times at least this many iterations after one untimed.
constexpr int kMinIterations = 4;

// The mean seconds of one iteration (a forward and backward of the whole model at tp 2 and
// micro-batch `mb`, each pair of ranks one tp group, then a 4-byte all-reduce in the pair by which
// it agrees to stop) over the first `active` ranks of `world`, after `iterations` timed on each
// while all of them ran; on every rank.
double time_point(MPI_Comm world, const ModelConfig& cfg, int64_t mb, int active, int iterations) {
  const int rank = comm_rank(world);
  const bool mine = rank < active;
  MPI_Comm pair, group;
  GPT_MPI_CHECK(MPI_Comm_split(world, mine ? rank / 2 : MPI_UNDEFINED, rank, &pair));
  GPT_MPI_CHECK(MPI_Comm_split(world, mine ? 0 : MPI_UNDEFINED, rank, &group));
  double per_iteration = 0;
  std::unique_ptr<CalibrationModel> model;
  if (mine) model = std::make_unique<CalibrationModel>(cfg, mb, pair);
  sleeping_barrier(world);
  if (mine) {
    // The sleeping barrier lets ranks go a nap apart (10 ms): start them together, so that each
    // is timed beside all the others from its first iteration.
    GPT_MPI_CHECK(MPI_Barrier(group));
    MPI_Request all_timed = MPI_REQUEST_NULL;
    double start = 0;
    for (int it = 0;; ++it) {
      if (it == 1) start = now_seconds();  // the first warms up
      model->passes();
      int done = 0;
      if (all_timed != MPI_REQUEST_NULL)
        GPT_MPI_CHECK(MPI_Test(&all_timed, &done, MPI_STATUS_IGNORE));
      // The pair stops together: a rank that has seen every rank timed tells its partner.
      int either = 0;
      GPT_MPI_CHECK(MPI_Allreduce(&done, &either, 1, MPI_INT, MPI_MAX, pair));
      if (it == iterations) {
        per_iteration = (now_seconds() - start) / iterations;
        GPT_MPI_CHECK(MPI_Ibarrier(group, &all_timed));
      }
      if (either) break;
    }
    if (all_timed != MPI_REQUEST_NULL) GPT_MPI_CHECK(MPI_Wait(&all_timed, MPI_STATUS_IGNORE));
    model.reset();
    GPT_MPI_CHECK(MPI_Comm_free(&pair));
    GPT_MPI_CHECK(MPI_Comm_free(&group));
  }
  return sleeping_sum(world, per_iteration) / active;
}

// The meetings of one iteration of time_point as the cost model counts them: the blocking tp
// collectives of a forward and backward of the whole model at tp 2 (its exposed tp seconds with
// a turn of 1 s a meeting at 2 ranks a core, less those without, over the share), and the pair's
// agreement to stop.
double meetings_per_iteration(const ModelConfig& cfg, const Cluster& cluster, int64_t mb) {
  Cluster turned = cluster;
  turned.cpu.cores = 1;  // 2 ranks a core
  turned.cpu.turn_seconds = {{1, 2, 1.0}};
  Cluster plain = turned;
  plain.cpu.turn_seconds.clear();
  PlanLayout l;
  l.tp = 2;
  l.micro_batch = mb;
  l.precision = PrecisionRegime::kFp32;
  const auto tp_seconds = [&](const Cluster& c) {
    const ChunkCosts p = chunk_costs(cfg, l, c, 0);
    return p.forward.tp_exposed + p.backward_input.tp_exposed + p.backward_weight.tp_exposed;
  };
  return (tp_seconds(turned) - tp_seconds(plain)) / 2 + 1;
}

// Measures, at each of kTurnMicroBatches, an iteration of time_point with a core a rank (the
// first `cores` ranks) and at each share of kTurnShares that `world` has the ranks for, in
// kTurnRounds interleaved rounds of about `budget` seconds in all, each point the median over
// them. The cost model prices an iteration at share s as s x sharing_at(s) x its time with a core
// a rank, plus s x a turn at each meeting; so the turn is (time at s / s - sharing_at(s) x time
// at 1) / meetings, never below 0. Returns the grid on rank 0 (printing each figure), empty
// elsewhere.
CpuModel::ScaleGrid measure_turn_seconds(MPI_Comm world, const ModelConfig& cfg,
                                         const Cluster& cluster, double budget) {
  const int cores = cluster.cpu.cores;
  std::vector<int> shares = {1};
  for (int share : kTurnShares)
    if (share * cores <= comm_size(world)) shares.push_back(share);
  const double window =
      budget / static_cast<double>(kTurnRounds * kTurnMicroBatches.size() * shares.size());
  // Per micro-batch, per share, per round.
  std::vector<std::vector<std::vector<double>>> times(
      kTurnMicroBatches.size(), std::vector<std::vector<double>>(shares.size()));
  for (int round = 0; round < kTurnRounds; ++round)
    for (size_t k = 0; k < kTurnMicroBatches.size(); ++k)
      for (size_t j = 0; j < shares.size(); ++j) {
        // The iterations the window holds, from the last round's time with a core a rank (a
        // first guess of 10 ms an iteration in the first).
        const double alone = times[k][0].empty() ? 0.01 : times[k][0].back();
        const int iterations =
            std::max(kMinIterations, static_cast<int>(std::ceil(window / (shares[j] * alone))));
        times[k][j].push_back(
            time_point(world, cfg, kTurnMicroBatches[k], shares[j] * cores, iterations));
      }
  CpuModel::ScaleGrid grid;
  if (comm_rank(world) != 0) return grid;
  for (size_t k = 0; k < kTurnMicroBatches.size(); ++k) {
    const int64_t mb = kTurnMicroBatches[k];
    const double alone = median_of(times[k][0]);
    const double meetings = meetings_per_iteration(cfg, cluster, mb);
    for (size_t j = 1; j < shares.size(); ++j) {
      const double share = shares[j], at = median_of(times[k][j]);
      const double sharing = cluster.cpu.sharing_at(share, static_cast<double>(mb));
      CpuModel::GridPoint p{static_cast<double>(mb), share,
                            std::max(0.0, (at / share - sharing * alone) / meetings)};
      std::printf(
          "calibrate: taking turns at micro-batch %lld, tp 2 in pairs, %.0f meetings an "
          "iteration: a core a rank %.2f ms; %g ranks a core %.2f ms (processor sharing with "
          "sharing_scale %.3f: %.2f ms): each meeting %.1f us more per rank a core\n",
          static_cast<long long>(mb), meetings, alone * 1e3, share, at * 1e3, sharing,
          share * sharing * alone * 1e3, p.scale * 1e6);
      grid.push_back(p);
    }
  }
  return grid;
}

}  // namespace

void calibrate_turns(MPI_Comm world, const ModelConfig& model, double seconds,
                     const std::string& file) {
  // Checked on every rank and agreed: one error line, and every rank exits.
  Cluster cluster;
  agree_on_failure(world, [&] {
    cluster = load_cluster(file);
    GPT_INPUT_CHECK(cluster.cpu.active(), "--calibrate-turns "
                                              << file
                                              << " is not a CPU cluster file (plan --calibrate "
                                                 "writes one)");
    MPI_Comm node;
    GPT_MPI_CHECK(
        MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm_rank(world), MPI_INFO_NULL, &node));
    const int node_ranks = comm_size(node);
    GPT_MPI_CHECK(MPI_Comm_free(&node));
    GPT_INPUT_CHECK(node_ranks == comm_size(world),
                    "--calibrate-turns runs on one node (this job spans more)");
    GPT_INPUT_CHECK(comm_size(world) >= 2 * cluster.cpu.cores,
                    "--calibrate-turns needs at least 2 ranks a core of "
                        << file << "'s " << cluster.cpu.cores << " (mpiexec -n "
                        << 2 * cluster.cpu.cores
                        << " or more; as many as the layouts to be priced run)");
    GPT_INPUT_CHECK(model.n_head % 2 == 0,
                    "--calibrate-turns runs the model at tp 2: --n-head must be even");
  });
  cluster.cpu.turn_seconds = measure_turn_seconds(world, model, cluster, seconds);
  if (comm_rank(world) != 0) return;
  // The file's own comment lines stay, with one more saying what was added.
  std::ifstream in(file);
  std::string header, line;
  while (std::getline(in, line) && !line.empty() && line[0] == '#') header += line + "\n";
  in.close();
  std::ofstream out(file);
  GPT_INPUT_CHECK(out.good(), "--calibrate-turns " << file << " cannot be written");
  out << header << "# plan --calibrate-turns: turn_seconds measured with " << comm_size(world)
      << " ranks on " << cluster.cpu.cores << " cores\n"
      << cluster_file_text(cluster);
  std::printf("calibrate: added turn_seconds to %s\n", file.c_str());
}

}  // namespace gpt
