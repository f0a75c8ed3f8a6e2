// `plan --calibrate` (see calibrate.h). Each figure is timed where it is used: the GEMMs
// through the CPU backend's matmul (oneDNN), the layers through a real ModelStage of the model
// given to plan (tp 1, one rank, the whole model), the cost of taking turns on a core through
// copies of that stage run at once in threads, the collectives through MPI sub-communicators of
// the job. Medians, not minima: train's step times are medians too.
#include "launch/calibration/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/logging.h"
#include "framework/timer.h"
#include "launch/calibration/calibration_model.h"
#include "launch/calibration/sleeping_wait.h"
#include "parallel/communicator.h"
#include "parallel/planner/cluster_file.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/link_model.h"

namespace gpt {
namespace {

// Median seconds of `body` over repetitions that fill about `budget` seconds (3 to 50 of them),
// after one untimed call (first touch).
template <typename F>
double time_median(double budget, F&& body) {
  body();
  std::vector<double> times;
  const double start = now_seconds();
  while (times.size() < 50 && (times.size() < 3 || now_seconds() - start < budget)) {
    const double t0 = now_seconds();
    body();
    times.push_back(now_seconds() - t0);
  }
  return median_of(times);
}

// Each figure of the compute is measured in this many rounds, interleaved, and its median over
// them kept: a virtual machine can run a few seconds 30-50% slow, which one round absorbs.
constexpr int kComputeRounds = 3;

// The median over rounds of each position of `rounds` (each round a vector of the same length).
std::vector<double> medians_over_rounds(const std::vector<std::vector<double>>& rounds) {
  std::vector<double> out;
  for (size_t i = 0; i < rounds.front().size(); ++i) {
    std::vector<double> values;
    for (const std::vector<double>& round : rounds) values.push_back(round[i]);
    out.push_back(median_of(values));
  }
  return out;
}

constexpr std::array<int64_t, 6> kGemmSizes = {32, 64, 128, 256, 512, 1024};

// FLOP/s of out (n, n) = in (n, n) . W^T at each of kGemmSizes.
std::vector<double> measure_gemm_rates(Backend& backend, double budget) {
  std::vector<double> rates;
  for (int64_t n : kGemmSizes) {
    std::vector<float> in(n * n, 0.01f), w(n * n, 0.02f), out(n * n);
    const double t = time_median(budget / kGemmSizes.size(), [&] {
      backend.matmul_forward(out.data(), in.data(), w.data(), nullptr, n, n, n);
    });
    rates.push_back(2.0 * n * n * n / t);
  }
  return rates;
}

// The GEMM's peak and, per product's FLOPs, the share of it reached, from kGemmSizes' FLOP/s.
void set_gemm(const std::vector<double>& rates, GpuModel& gpu) {
  std::vector<std::pair<double, double>> rate;  // (FLOPs, FLOP/s)
  for (size_t i = 0; i < rates.size(); ++i) {
    const double n = static_cast<double>(kGemmSizes[i]);
    rate.emplace_back(2 * n * n * n, rates[i]);
  }
  double peak = 0;
  for (const auto& [flops, r] : rate) peak = std::max(peak, r);
  gpu.peak_fp32 = gpu.peak_bf16 = peak;  // the CPU backend's products are fp32 either way
  gpu.gemm_efficiency = 1;
  gpu.gemm_curve.clear();
  for (const auto& [flops, r] : rate) gpu.gemm_curve.emplace_back(flops, r / peak);
  for (const auto& [flops, r] : rate)
    std::printf("calibrate: gemm %.3g FLOP: %.2f GFLOP/s (%.0f%% of the best)\n", flops, r / 1e9,
                100 * r / peak);
}

// Bytes/s of a triad (a = b + s c) over 64 MiB arrays: the streaming rate one rank reaches.
double measure_stream(double budget) {
  const size_t n = size_t{16} << 20;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const double t = time_median(budget, [&] {
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
  });
  // Reading the result keeps the compiler from dropping the loop.
  if (a[0] != 2.0f) std::printf("calibrate: triad gave %g, not 2\n", static_cast<double>(a[0]));
  return 12.0 * n / t;
}

// The real layers' seconds of forward, input-gradient and weight-gradient passes of the whole
// model (tp 1, one rank) at micro-batch `mb`, and the bytes one copy of it holds.
std::array<double, 3> measure_layers(const ModelConfig& cfg, int64_t mb, double budget,
                                     int64_t& bytes) {
  CalibrationModel copy(cfg, mb);
  std::array<std::vector<double>, 3> times;
  const double start = now_seconds();
  for (int rep = 0; rep < 30 && (rep < 4 || now_seconds() - start < budget); ++rep) {
    const std::array<double, 3> t = copy.passes();
    if (rep == 0) continue;  // first touch
    for (int k = 0; k < 3; ++k) times[k].push_back(t[k]);
  }
  bytes = copy.peak_bytes();
  return {median_of(times[0]), median_of(times[1]), median_of(times[2])};
}

// The micro-batch sizes the layers are timed at: the real layers' time over the model's falls
// with the size on this machine's CPU (forward 1.30-1.32 at 1, 1.18-1.19 at 16), not smoothly
// enough for two points to carry it.
constexpr std::array<int64_t, 5> kLayerMicroBatches = {1, 2, 4, 8, 16};

// The micro-batch sizes and the shares (ranks a core) at which the cost of taking turns on a
// core is timed: the oversubscribed runs here share 2 to 8 ranks a core at micro-batches 1 to 4.
constexpr std::array<int64_t, 2> kSharingMicroBatches = {1, 4};
constexpr std::array<int, 3> kShares = {2, 4, 8};
// Shares that need more copies of the model than this on a machine are not timed, nor those
// whose copies would take more than a quarter of its memory.
constexpr int kMaxSharingCopies = 64;
// Each copy is timed over a window of passes, at least kMinSharingReps of them, and at the
// default budget (20 s) about 0.2 s: many of the scheduler's slices (a few ms each), so that the
// figure is the core's rate over them, not where the slices fell in a pass (timed pass by pass,
// at micro-batch 1 and 2 ranks a core, one copy's median read 2.2 times processor sharing).
constexpr double kSharingBudgetShare = 0.2;  // of --calibrate-seconds, over every point and round
constexpr int kMinSharingReps = 6;

// The layers a pipeline stage holds, below the whole model's, at which the stage's size is timed:
// the whole model's halved down to one (4 layers: 1 and 2; 24: 1, 3, 6 and 12), ascending.
std::vector<int64_t> stage_layer_counts(const ModelConfig& cfg) {
  std::vector<int64_t> counts;
  for (int64_t layers = cfg.n_layer / 2; layers >= 1; layers /= 2) counts.push_back(layers);
  std::reverse(counts.begin(), counts.end());
  return counts;
}

// What the timing ranks measure each round, in order: the three passes at each of
// kLayerMicroBatches (measure_layer_times), then a forward and backward at each of
// kSharingMicroBatches by kShares (measure_shared_passes, 0 where not timed), then a forward
// and backward of a model of each of stage_layer_counts' layers at each of kLayerMicroBatches
// (measure_stage_times).
constexpr size_t kPassFigures = 3 * kLayerMicroBatches.size();
constexpr size_t kSharingFigures = kSharingMicroBatches.size() * kShares.size();
size_t timed_figures(const ModelConfig& cfg) {
  return kPassFigures + kSharingFigures +
         kLayerMicroBatches.size() * stage_layer_counts(cfg).size();
}

// Copies of the model each timing rank runs for `share` ranks a core (rounded up) of a machine
// with `cores`: the machine's, not a node's, where emulated nodes share one (their ranks share
// all its cores, and the other nodes' ranks sleep while these time).
int copies_for_share(int share, int cores, int timing_ranks) {
  return (share * cores + timing_ranks - 1) / timing_ranks;
}

// The real layers' seconds at each of kLayerMicroBatches: forward, input gradient and weight
// gradient of each in turn.
std::vector<double> measure_layer_times(const ModelConfig& cfg, double budget,
                                        std::map<int64_t, int64_t>& bytes) {
  std::vector<double> times;
  for (int64_t mb : kLayerMicroBatches)
    for (double t : measure_layers(cfg, mb, budget / kLayerMicroBatches.size(), bytes[mb]))
      times.push_back(t);
  return times;
}

// A forward and backward of the model cut to each of stage_layer_counts' layers (the embedding
// and head kept) at each of kLayerMicroBatches, micro-batch by micro-batch.
std::vector<double> measure_stage_times(const ModelConfig& cfg, double budget) {
  const std::vector<int64_t> counts = stage_layer_counts(cfg);
  std::vector<double> times;
  for (int64_t mb : kLayerMicroBatches)
    for (int64_t layers : counts) {
      ModelConfig stage = cfg;
      stage.n_layer = layers;
      int64_t bytes = 0;
      const std::array<double, 3> t = measure_layers(
          stage, mb, budget / static_cast<double>(kLayerMicroBatches.size() * counts.size()),
          bytes);
      times.push_back(t[0] + t[1] + t[2]);
    }
  return times;
}

// The model's three passes of the whole of `cfg` (tp 1, one rank) at micro-batch `mb` on `c`
// with no CPU scale: what the real layers' times are divided by.
ChunkCosts modelled_passes(const ModelConfig& cfg, int64_t mb, Cluster c) {
  c.cpu.forward_scale.clear();
  c.cpu.backward_input_scale.clear();
  c.cpu.backward_weight_scale.clear();
  c.cpu.stage_scale.clear();
  PlanLayout l;
  l.micro_batch = mb;
  l.precision = PrecisionRegime::kFp32;
  return chunk_costs(cfg, l, c, 0);
}

// The pass scales: the real layers' time (measure_layer_times') over the model's at each of
// kLayerMicroBatches, for forward, input gradient and weight gradient.
void set_pass_scales(const std::vector<double>& times, const ModelConfig& cfg, Cluster& c) {
  const Cluster unscaled = c;
  c.cpu.forward_scale.clear();
  c.cpu.backward_input_scale.clear();
  c.cpu.backward_weight_scale.clear();
  for (size_t k = 0; k < kLayerMicroBatches.size(); ++k) {
    const int64_t mb = kLayerMicroBatches[k];
    const std::array<double, 3> real = {times[3 * k], times[3 * k + 1], times[3 * k + 2]};
    const ChunkCosts model = modelled_passes(cfg, mb, unscaled);
    const std::array<double, 3> modelled = {model.forward.compute, model.backward_input.compute,
                                            model.backward_weight.compute};
    std::printf(
        "calibrate: layers at micro-batch %lld: forward %.4f s (model %.4f), input gradient "
        "%.4f s (%.4f), weight gradient %.4f s (%.4f)\n",
        static_cast<long long>(mb), real[0], modelled[0], real[1], modelled[1], real[2],
        modelled[2]);
    const double size = static_cast<double>(mb);
    c.cpu.forward_scale.emplace_back(size, real[0] / modelled[0]);
    c.cpu.backward_input_scale.emplace_back(size, real[1] / modelled[1]);
    c.cpu.backward_weight_scale.emplace_back(size, real[2] / modelled[2]);
  }
}

// A forward and backward at micro-batch `mb` (one of kLayerMicroBatches) with a core each, from
// measure_layer_times' `times`.
double alone_seconds(const std::vector<double>& times, int64_t mb) {
  const size_t at =
      static_cast<size_t>(std::find(kLayerMicroBatches.begin(), kLayerMicroBatches.end(), mb) -
                          kLayerMicroBatches.begin());
  return times[3 * at] + times[3 * at + 1] + times[3 * at + 2];
}

// The sharing scale (cluster.h, CpuModel::sharing_scale) from measure_shared_passes' seconds,
// which follow the layer times in `times` (kSharingMicroBatches by kShares, 0: not timed): each
// over processor sharing's, the share times the same passes with a core each.
void set_sharing_scale(const std::vector<double>& times, int machine_cores, int timing_ranks,
                       Cluster& c) {
  c.cpu.sharing_scale.clear();
  size_t k = kPassFigures;
  for (int64_t mb : kSharingMicroBatches) {
    const double alone = alone_seconds(times, mb);
    for (int share : kShares) {
      const double t = times[k++];
      if (t == 0) continue;
      const int copies = copies_for_share(share, machine_cores, timing_ranks);
      CpuModel::GridPoint p;
      p.micro_batch = static_cast<double>(mb);
      p.at = static_cast<double>(copies * timing_ranks) / machine_cores;  // ranks a core
      p.scale = t / (p.at * alone);
      std::printf(
          "calibrate: %g ranks a core at micro-batch %lld: a forward and backward %.4f s, "
          "processor sharing %.4f s (x%.3f)\n",
          p.at, static_cast<long long>(mb), t, p.at * alone, p.scale);
      c.cpu.sharing_scale.push_back(p);
    }
  }
}

// The stage scale (cluster.h, CpuModel::stage_scale) from measure_stage_times' seconds, which
// follow the sharing figures in `times`: at each micro-batch, each cut model's real time over the
// model's, over the same ratio of the whole model; the whole model's point is 1 by definition.
void set_stage_scale(const std::vector<double>& times, const ModelConfig& cfg, Cluster& c) {
  c.cpu.stage_scale.clear();
  const std::vector<int64_t> counts = stage_layer_counts(cfg);
  if (counts.empty()) return;  // one layer: no smaller stage
  const auto modelled = [&c](const ModelConfig& m, int64_t mb) {
    const ChunkCosts p = modelled_passes(m, mb, c);
    return p.forward.compute + p.backward_input.compute + p.backward_weight.compute;
  };
  size_t k = kPassFigures + kSharingFigures;
  for (int64_t mb : kLayerMicroBatches) {
    const double whole = alone_seconds(times, mb) / modelled(cfg, mb);
    for (int64_t layers : counts) {
      ModelConfig stage = cfg;
      stage.n_layer = layers;
      const double t = times[k++], model = modelled(stage, mb);
      CpuModel::GridPoint p{static_cast<double>(mb), static_cast<double>(layers),
                            t / model / whole};
      std::printf(
          "calibrate: %lld layer(s) at micro-batch %lld: a forward and backward %.4f s (model "
          "%.4f), x%.3f the whole model's ratio\n",
          static_cast<long long>(layers), static_cast<long long>(mb), t, model, p.scale);
      c.cpu.stage_scale.push_back(p);
    }
    c.cpu.stage_scale.push_back({static_cast<double>(mb), static_cast<double>(cfg.n_layer), 1});
  }
}

// Where this rank sits in the job: its node (ranks that share memory, as MPI sees them; under
// scripts/netns each namespace is one), its place there, and how many nodes share rank 0's
// machine (the same kernel boot id: emulated nodes on one machine share its cores).
struct JobShape {
  int nodes = 1, node = 0, local_rank = 0, ranks_on_first_node = 1, nodes_on_first_machine = 1;
};

JobShape job_shape(MPI_Comm world) {
  JobShape shape;
  MPI_Comm local, leaders;
  GPT_MPI_CHECK(
      MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm_rank(world), MPI_INFO_NULL, &local));
  shape.local_rank = comm_rank(local);
  GPT_MPI_CHECK(
      MPI_Comm_split(world, shape.local_rank == 0 ? 0 : MPI_UNDEFINED, comm_rank(world), &leaders));
  std::array<char, 64> boot{}, first_boot{};
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!std::fgets(boot.data(), boot.size(), f)) boot.fill(0);
    std::fclose(f);
  }
  int same_machine = 0;
  if (leaders != MPI_COMM_NULL) {
    shape.node = comm_rank(leaders);
    shape.nodes = comm_size(leaders);
    first_boot = boot;
    GPT_MPI_CHECK(
        MPI_Bcast(first_boot.data(), static_cast<int>(first_boot.size()), MPI_CHAR, 0, leaders));
    int mine = first_boot == boot ? 1 : 0;
    GPT_MPI_CHECK(MPI_Allreduce(&mine, &same_machine, 1, MPI_INT, MPI_SUM, leaders));
    GPT_MPI_CHECK(MPI_Comm_free(&leaders));
  }
  GPT_MPI_CHECK(MPI_Bcast(&shape.node, 1, MPI_INT, 0, local));
  GPT_MPI_CHECK(MPI_Bcast(&shape.nodes, 1, MPI_INT, 0, local));
  GPT_MPI_CHECK(MPI_Bcast(&same_machine, 1, MPI_INT, 0, local));
  shape.nodes_on_first_machine = same_machine;
  int local_size = comm_size(local);
  GPT_MPI_CHECK(MPI_Bcast(&local_size, 1, MPI_INT, 0, world));  // rank 0's node's
  shape.ranks_on_first_node = local_size;
  GPT_MPI_CHECK(MPI_Comm_free(&local));
  return shape;
}

// Seconds of one forward and backward of the whole model at micro-batch `mb` while `copies`
// copies of it run at once, each in a thread of this rank, and as many in each other rank of
// `timing`: each copy's passes timed together over `reps` of them after one untimed, the mean
// over the copies. Every copy keeps running until all copies of every rank have their passes,
// so each was timed while all ran. Threads, not ranks: the job's ranks are given (mpiexec -n
// 2), and a thread is scheduled on a core as a process is (separate copies, so the same caches
// to refill).
double measure_shared_passes(const ModelConfig& cfg, int64_t mb, int copies, int reps,
                             MPI_Comm timing) {
  std::vector<std::unique_ptr<CalibrationModel>> models;
  for (int i = 0; i < copies; ++i) models.push_back(std::make_unique<CalibrationModel>(cfg, mb));
  sleeping_barrier(timing);
  std::atomic<int> counted{0};
  std::atomic<bool> stop{false};
  std::vector<double> seconds(static_cast<size_t>(copies));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(copies));
  const auto run = [&](int i) {
    double start = 0;
    bool posted = false;
    MPI_Request all_counted;
    try {
      for (int rep = 0; !stop; ++rep) {
        models[i]->passes();
        if (rep == 0) start = now_seconds();
        if (rep == reps) {
          seconds[static_cast<size_t>(i)] = (now_seconds() - start) / reps;
          ++counted;
        }
        if (i != 0) continue;
        // The first copy runs on the thread that calls MPI: it ends the run for all.
        if (!posted && counted == copies) {
          GPT_MPI_CHECK(MPI_Ibarrier(timing, &all_counted));
          posted = true;
        }
        int done = 0;
        if (posted) GPT_MPI_CHECK(MPI_Test(&all_counted, &done, MPI_STATUS_IGNORE));
        if (done) stop = true;
      }
    } catch (...) {  // every copy stops; rethrown below, which ends the job (run_program)
      errors[static_cast<size_t>(i)] = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> workers;
  for (int i = 1; i < copies; ++i) workers.emplace_back(run, i);
  run(0);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return std::accumulate(seconds.begin(), seconds.end(), 0.0) / copies;
}

// Copies a timing rank runs for `share` ranks a core (rounded up), or 0 where the share is not
// timed (kMaxSharingCopies, or the copies' `bytes` over a quarter of the machine's `memory`).
int sharing_copies(int share, int cores, int timing_ranks, int64_t bytes, double memory) {
  const int copies = copies_for_share(share, cores, timing_ranks);
  const int total = copies * timing_ranks;
  if (total > kMaxSharingCopies || static_cast<double>(bytes) * total > memory / 4) return 0;
  return copies;
}

// What measure_mpi times: an all-reduce over the group; the group's two ranks exchanging a message
// each way at once, as each step of a ring does; one message one way and a 4-byte acknowledgement
// back, as each round of a binomial tree is; or Open MPI's nonblocking all-reduce in place, posted
// and waited for (libnbc's binomial reduce and broadcast over the 2 ranks, as train's dp buckets
// run it), timed per round.
enum class Pattern { kAllReduce, kExchange, kOneWay, kNonblockingAllReduce };

// Median seconds of `pattern` with `bytes` in groups of ranks of the same `color`
// (MPI_UNDEFINED: not measuring), all groups at once, as the group's first rank times each
// repetition; rank 0's group's figure, which every rank returns. A group's first rank decides
// how many repetitions fit the budget (5 to 199 after a warm-up), the others follow its count.
double measure_mpi(MPI_Comm world, int color, double bytes, Pattern pattern, double budget) {
  MPI_Comm group;
  GPT_MPI_CHECK(MPI_Comm_split(world, color, comm_rank(world), &group));
  double t = 0;
  if (group != MPI_COMM_NULL) {
    const int rank = comm_rank(group);
    const int count = static_cast<int>(bytes / 4);
    std::vector<float> buf(static_cast<size_t>(count), 1.0f), in(buf.size());
    const int peer = 1 - rank;
    std::vector<double> times;  // each repetition's, on the group's first rank
    const double t0 = now_seconds();
    for (int rep = 0;; ++rep) {
      int go = rank == 0 && rep < 200 && (rep < 6 || now_seconds() - t0 < budget);
      GPT_MPI_CHECK(MPI_Bcast(&go, 1, MPI_INT, 0, group));
      if (!go) break;
      const double start = now_seconds();
      if (pattern == Pattern::kExchange) {
        GPT_MPI_CHECK(MPI_Sendrecv(buf.data(), count, MPI_FLOAT, peer, 0, in.data(), count,
                                   MPI_FLOAT, peer, 0, group, MPI_STATUS_IGNORE));
      } else if (pattern == Pattern::kOneWay) {
        int ack = 0;
        if (rank == 0) {
          GPT_MPI_CHECK(MPI_Send(buf.data(), count, MPI_FLOAT, 1, 0, group));
          GPT_MPI_CHECK(MPI_Recv(&ack, 1, MPI_INT, 1, 0, group, MPI_STATUS_IGNORE));
        } else {
          GPT_MPI_CHECK(MPI_Recv(buf.data(), count, MPI_FLOAT, 0, 0, group, MPI_STATUS_IGNORE));
          GPT_MPI_CHECK(MPI_Send(&ack, 1, MPI_INT, 0, 0, group));
        }
      } else if (pattern == Pattern::kNonblockingAllReduce) {
        MPI_Request request;
        GPT_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, group, &request));
        GPT_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
      } else {
        GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, group));
      }
      if (rep > 0 && rank == 0) times.push_back(now_seconds() - start);  // the first warms up
    }
    // The median, not the mean: a moment's stall of the machine moves a few repetitions.
    // A 2-rank binomial all-reduce's two rounds each move the buffer one way.
    const bool two_rounds = pattern == Pattern::kNonblockingAllReduce;
    if (rank == 0) t = median_of(times) / (two_rounds ? 2 : 1);
    GPT_MPI_CHECK(MPI_Comm_free(&group));
  }
  return sleeping_bcast(world, t);  // ranks outside the group wait here while it measures
}

// The largest message whose send completes before its receiver takes it (MPI's eager limit), in
// the group of the 2 ranks of `color` (MPI_UNDEFINED: not measuring): the first sends while the
// second waits kLateReceive before receiving, and a send that completes in less than half of
// that did not wait for it. Sizes double from 4 kB to 4 MB, then the boundary is bisected to 64
// bytes; 0 if 4 kB waits. Below 4 kB Open MPI's shared memory alternates from one size to the
// next here (512 bytes waited, 1 kB did not, 2 kB did), and no activation is that small. Rank
// 0's group's figure, on every rank. Measured, not read from MCA parameters: which transport
// carries a pair, and its headers, are Open MPI's business (its TCP's limit is 64 kB with them).
double measure_eager_bytes(MPI_Comm world, int color) {
  constexpr double kLateReceive = 0.04;  // s: a shaped link's 64 kB take 5 ms at 100 Mbit/s
  MPI_Comm group;
  GPT_MPI_CHECK(MPI_Comm_split(world, color, comm_rank(world), &group));
  double eager = 0;
  if (group != MPI_COMM_NULL) {
    const int rank = comm_rank(group);
    std::vector<char> buf(size_t{4} << 20);
    // Whether a send of `bytes` completes before its receiver, kLateReceive late, takes it.
    const auto completes_early = [&](int bytes) {
      GPT_MPI_CHECK(MPI_Barrier(group));
      int early = 0;
      if (rank == 0) {
        const double start = now_seconds();
        MPI_Request request;
        GPT_MPI_CHECK(MPI_Isend(buf.data(), bytes, MPI_CHAR, 1, 0, group, &request));
        GPT_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        early = now_seconds() - start < kLateReceive / 2 ? 1 : 0;
      } else {
        usleep(static_cast<useconds_t>(kLateReceive * 1e6));
        GPT_MPI_CHECK(MPI_Recv(buf.data(), bytes, MPI_CHAR, 0, 0, group, MPI_STATUS_IGNORE));
      }
      GPT_MPI_CHECK(MPI_Bcast(&early, 1, MPI_INT, 0, group));
      return early == 1;
    };
    int low = 0, high = 4096;  // low completes early (0: none known), high waits
    while (high <= static_cast<int>(buf.size()) && completes_early(high)) low = high, high *= 2;
    if (high > static_cast<int>(buf.size())) {
      eager = low;  // every size tried: at least this
    } else if (low > 0) {
      while (high - low > 64) {
        const int mid = (low + high) / 2;
        (completes_early(mid) ? low : high) = mid;
      }
      eager = low;
    }
    GPT_MPI_CHECK(MPI_Comm_free(&group));
  }
  return sleeping_bcast(world, eager);
}

// A bandwidth curve, (size, size over seconds), from `times` measured at ascending `sizes`, each
// time lowered to the least of the larger sizes' (a small message's median can exceed a larger
// one's when the machine stalls for a moment; no transfer gets slower by shrinking).
std::vector<std::pair<double, double>> monotone_curve(const std::vector<double>& sizes,
                                                      std::vector<double> times) {
  for (size_t i = times.size() - 1; i-- > 0;) times[i] = std::min(times[i], times[i + 1]);
  std::vector<std::pair<double, double>> curve;
  for (size_t i = 0; i < sizes.size(); ++i) curve.emplace_back(sizes[i], sizes[i] / times[i]);
  return curve;
}

// The intra-node link from rank 0's node: a bandwidth curve by size from 2-rank all-reduces (bus
// bandwidth = size over time over 2 ranks), and its one-way curve from Open MPI's nonblocking
// all-reduce in place over the same 2 ranks, each of whose two binomial rounds moves the buffer
// one way (what train's dp buckets run; a pipeline's message is priced by it too); with more
// than one node, the inter-node link from exchanges between the first two nodes, every rank of
// the first node paired with its peer on the second at once (so each pair gets its share of the
// nodes' link, the per-GPU figure of the cluster file), as a bandwidth curve by size. Then the
// measured all-reduces over larger groups beside the model's figures.
void measure_links(MPI_Comm world, const JobShape& shape, double budget, Cluster& c) {
  const bool root = comm_rank(world) == 0;
  // Curves, not a latency-plus-bandwidth line: a least-squares line through 4 kB to 16 MB is
  // ruled by the large sizes, and its latency moved from 0.5 to 35 us between two calibrations
  // of this machine while a 4 kB all-reduce measured 2.1 and 2.3 us. From 8 bytes (the step's
  // loss and norm) through the tp and pipeline messages (tens to hundreds of kB) to dp buckets.
  const std::vector<double> sizes = {8, 4e3, 32e3, 128e3, 512e3, 2e6, 16e6};
  const double share = budget / (sizes.size() * 4), inter_share = budget / 16;
  // measure_mpi's color for a group of the first node's first n ranks.
  const auto first_ranks = [&shape](int n) {
    return shape.node == 0 && shape.local_rank < n ? 0 : MPI_UNDEFINED;
  };
  std::vector<double> intra, intra_one_way;
  const bool pair_inside = shape.ranks_on_first_node >= 2;
  for (double s : sizes)
    if (pair_inside) {
      intra.push_back(measure_mpi(world, first_ranks(2), s, Pattern::kAllReduce, share));
      intra_one_way.push_back(
          measure_mpi(world, first_ranks(2), s, Pattern::kNonblockingAllReduce, share / 2));
      if (root)
        std::printf(
            "calibrate: %.3g B inside a node: all-reduce over 2 ranks %.1f us, a round of "
            "its nonblocking one %.1f us\n",
            s, intra.back() * 1e6, intra_one_way.back() * 1e6);
    }
  if (shape.nodes > 1) {
    // Across nodes a bandwidth curve by message size, each point the size over the exchange's
    // time (the link's latency inside it): on a shaped link a message's effective rate depends on
    // its size beyond latency plus size over bandwidth (Open MPI's rendezvous handshakes above
    // its eager limit wait behind the data queued in the shaper). Sizes up to 1 MB: an emulated
    // node's link may carry only a few MB/s. Then the same one way, each message acknowledged
    // (the one-way curve, for binomial trees' rounds): there the handshakes do not queue behind
    // the other way's data.
    const std::vector<double> inter_sizes = {4e3, 16e3, 64e3, 256e3, 1e6};
    const int color = shape.node < 2 ? shape.local_rank : MPI_UNDEFINED;
    // Bandwidth by size of `pattern` between the pairs, all at once, printed as `what`.
    const auto curve_of = [&](Pattern pattern, const char* what) {
      std::vector<std::pair<double, double>> curve;
      for (double s : inter_sizes) {
        const double t = measure_mpi(world, color, s, pattern, inter_share);
        curve.emplace_back(s, s / t);
        if (root)
          std::printf(
              "calibrate: %.3g B %s across nodes, %d pair(s) at once: %.1f us (%.4g GB/s "
              "a pair)\n",
              s, what, shape.ranks_on_first_node, t * 1e6, s / t / kGB);
      }
      return curve;
    };
    LinkModel& link = c.inter_node;
    link.latency = 0;
    link.curve = curve_of(Pattern::kExchange, "each way at once");
    link.bandwidth = link.curve.back().second;
    link.one_way_curve = curve_of(Pattern::kOneWay, "one way and an acknowledgement back");
    link.eager_bytes = measure_eager_bytes(world, color == 0 ? 0 : MPI_UNDEFINED);
    if (root) std::printf("calibrate: eager limit across nodes: %.0f B\n", link.eager_bytes);
  }
  if (pair_inside) {
    LinkModel& link = c.intra_node;
    link.latency = 0;
    link.curve = monotone_curve(sizes, intra);
    link.bandwidth = link.curve.back().second;
    link.one_way_curve = monotone_curve(sizes, intra_one_way);
    link.eager_bytes = measure_eager_bytes(world, first_ranks(2));
    if (root) std::printf("calibrate: eager limit inside a node: %.0f B\n", link.eager_bytes);
  } else {
    c.intra_node = c.inter_node;
  }
  if (shape.nodes == 1) c.inter_node = c.intra_node;  // one machine: no second link to measure
  if (!pair_inside && root) std::printf("calibrate: one rank a node: intra_node = inter_node\n");
  const LinkModel& link = c.intra_node;
  // Groups up to the cores: beyond them the ranks take turns, which the all-reduce's figures
  // here do not model (turn_seconds does, per call).
  for (int n = 4; pair_inside && n <= std::min(shape.ranks_on_first_node, c.cpu.cores); n *= 2)
    for (double s : sizes) {
      const double t = measure_mpi(world, first_ranks(n), s, Pattern::kAllReduce, share / 2);
      if (root)
        std::printf("calibrate: all-reduce %.3g B over %d ranks: %.1f us (model %.1f)\n", s, n,
                    t * 1e6, collective_seconds(link, Collective::kAllReduce, s, n) * 1e6);
    }
}

int online_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace

Cluster calibrate_cpu_cluster(MPI_Comm world, const ModelConfig& model, double seconds,
                              const std::string& output) {
  GPT_INPUT_CHECK(comm_size(world) >= 2,
                  "--calibrate needs 2 or more ranks (mpiexec -n 2 plan --calibrate FILE) to "
                  "measure MPI");
  const double budget = seconds;
  const JobShape shape = job_shape(world);
  Cluster c;
  c.name = "cpu-calibrated";
  // One node: 64 rank slots, ranks beyond the cores share them. Several: the job's ranks a node,
  // and the cores of the machine shared by the nodes on it.
  c.gpus_per_node = shape.nodes == 1 ? 64 : shape.ranks_on_first_node;
  const int machine_cores = online_cores();
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > machine_cores)
    log::warn0("plan --calibrate: this rank may run on " + std::to_string(machine_cores) +
               " of the " + std::to_string(online) +
               " cores online and counts those (the launcher binds it; mpiexec --bind-to none "
               "counts the machine's)");
  c.cpu.cores = std::max(1, machine_cores / shape.nodes_on_first_machine);
  c.cpu.threads = 1;
  c.gpu.name = "cpu-core";
  c.gpu.sms = 1;  // no tiles in waves: the GEMM curve carries the size effects
  c.gpu.memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  c.gpu.memory_efficiency = 1;
  // The layers run on every core of the first node at once (one rank each, as many as it has
  // ranks), each figure the slowest rank's: a job keeps all its cores busy, the machine's own
  // work (the MPI launcher, kernel threads) then lands on some of them, and the job waits for
  // its slowest rank (docs/PLANNER.md). The GEMMs and the triad run on rank 0 alone.
  // Then the same ranks time the cost of taking turns on a core (measure_shared_passes).
  const int layer_ranks = std::min(shape.ranks_on_first_node, c.cpu.cores);
  const bool times_layers = shape.node == 0 && shape.local_rank < layer_ranks;
  MPI_Comm timing;
  GPT_MPI_CHECK(MPI_Comm_split(world, times_layers ? 0 : MPI_UNDEFINED, comm_rank(world), &timing));
  std::unique_ptr<Backend> backend = comm_rank(world) == 0 ? make_cpu_backend(1) : nullptr;
  std::map<int64_t, int64_t> copy_bytes;  // by micro-batch, one copy of the model's
  std::vector<std::vector<double>> gemm, stream, layers;
  for (int round = 0; round < kComputeRounds; ++round) {
    if (comm_rank(world) == 0) {
      gemm.push_back(measure_gemm_rates(*backend, budget * 0.15 / kComputeRounds));
      stream.push_back({measure_stream(budget * 0.05 / kComputeRounds)});
    }
    sleeping_barrier(world);
    if (times_layers) {
      std::vector<double> times =
          measure_layer_times(model, budget * 0.3 / kComputeRounds, copy_bytes);
      const double window = budget * kSharingBudgetShare / (kComputeRounds * kSharingFigures);
      for (int64_t mb : kSharingMicroBatches)
        for (int share : kShares) {
          const int copies =
              sharing_copies(share, machine_cores, layer_ranks, copy_bytes[mb], c.gpu.memory_bytes);
          const int reps =
              std::max(kMinSharingReps,
                       static_cast<int>(std::ceil(window / (share * alone_seconds(times, mb)))));
          times.push_back(copies ? measure_shared_passes(model, mb, copies, reps, timing) : 0);
        }
      for (double t : measure_stage_times(model, budget * 0.1 / kComputeRounds)) times.push_back(t);
      layers.push_back(times);
    }
    sleeping_barrier(world);
  }
  if (timing != MPI_COMM_NULL) GPT_MPI_CHECK(MPI_Comm_free(&timing));
  std::vector<double> layer_times =
      times_layers ? medians_over_rounds(layers) : std::vector<double>(timed_figures(model), 0.0);
  MPI_Request request;
  GPT_MPI_CHECK(MPI_Ireduce(comm_rank(world) == 0 ? MPI_IN_PLACE : layer_times.data(),
                            layer_times.data(), static_cast<int>(layer_times.size()), MPI_DOUBLE,
                            MPI_MAX, 0, world, &request));
  sleep_until_done(request);
  if (comm_rank(world) == 0) {
    set_gemm(medians_over_rounds(gemm), c.gpu);
    c.gpu.memory_bandwidth = medians_over_rounds(stream).front();
    std::printf("calibrate: stream (triad, 192 MiB): %.2f GB/s\n", c.gpu.memory_bandwidth / kGB);
    std::printf("calibrate: layers timed on %d rank(s) at once, the slowest's figures\n",
                layer_ranks);
    set_pass_scales(layer_times, model, c);
    set_sharing_scale(layer_times, machine_cores, layer_ranks, c);
    set_stage_scale(layer_times, model, c);
  }
  sleeping_barrier(world);
  measure_links(world, shape, budget * 0.4, c);
  if (comm_rank(world) == 0) {
    std::ofstream out(output);
    GPT_INPUT_CHECK(out.good(), "--calibrate " << output << " cannot be written");
    out << "# plan --calibrate: " << shape.nodes << " node(s) (" << shape.nodes_on_first_machine
        << " on the first machine), " << c.cpu.cores << " cores a node, measured with "
        << comm_size(world) << " ranks and the model " << model.n_layer << " layers, d "
        << model.d_model << ", seq " << model.seq_len << " (docs/PLANNER.md)\n"
        << cluster_file_text(c);
    std::printf("calibrate: wrote %s\n", output.c_str());
  }
  return c;
}

}  // namespace gpt
