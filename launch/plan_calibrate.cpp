// `plan --calibrate` (see plan_calibrate.h). Each figure is timed where it is used: the GEMMs
// through the CPU backend's matmul (oneDNN), the layers through a real GptStage of the model
// given to plan (tp 1, one rank, the whole model), the collectives through MPI sub-communicators
// of the job. Medians, not minima: train's step times are medians too.
#include "launch/plan_calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/timer.h"
#include "layers/gpt_stage.h"
#include "parallel/communicator.h"
#include "parallel/cost_model.h"

namespace gpt {
namespace {

constexpr double kGB = 1e9;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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

// GFLOP/s of out (n, n) = in (n, n) . W^T at sizes from 32 to 1024: the peak and, per
// product's FLOPs, the share of it reached.
void measure_gemm(Backend& backend, double budget, GpuModel& gpu) {
  std::vector<std::pair<double, double>> rate;  // (FLOPs, FLOP/s)
  for (int64_t n : {32, 64, 128, 256, 512, 1024}) {
    std::vector<float> in(n * n, 0.01f), w(n * n, 0.02f), out(n * n);
    const double t = time_median(budget / 6, [&] {
      backend.matmul_forward(out.data(), in.data(), w.data(), nullptr, n, n, n);
    });
    const double flops = 2.0 * n * n * n;
    rate.emplace_back(flops, flops / t);
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
  std::printf("calibrate: stream (triad, 192 MiB): %.2f GB/s (a[0] %g)\n", 12.0 * n / t / kGB,
              static_cast<double>(a[0]));
  return 12.0 * n / t;
}

// The real layers' seconds of forward, input-gradient and weight-gradient passes of the whole
// model (tp 1, one rank) at micro-batch `mb`.
std::array<double, 3> measure_layers(Backend& backend, const ModelConfig& cfg, int64_t mb,
                                     double budget) {
  auto self = make_mpi_communicator(MPI_COMM_SELF, "tp");
  TensorParallel tp(*self, backend);
  ParameterStore store(backend);
  GptStage stage(store, tp, cfg, StageSpec{0, cfg.n_layer, true, true, false}, mb, 1, 1);
  store.allocate();
  store.initialize(1);
  std::vector<int32_t> tokens(static_cast<size_t>(mb * cfg.seq_len)), targets(tokens.size());
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size - 1));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = token(rng), targets[i] = token(rng);
  std::array<std::vector<double>, 3> times;
  const double start = now_seconds();
  for (int rep = 0; rep < 30 && (rep < 4 || now_seconds() - start < budget); ++rep) {
    const double t0 = now_seconds();
    stage.forward(0, tokens.data(), targets.data());
    const double t1 = now_seconds();
    stage.backward_input(0, 0, 1.0f / static_cast<float>(tokens.size()));
    const double t2 = now_seconds();
    stage.backward_weight(0, 0);
    const double t3 = now_seconds();
    if (rep == 0) continue;  // first touch
    times[0].push_back(t1 - t0);
    times[1].push_back(t2 - t1);
    times[2].push_back(t3 - t2);
  }
  return {median_of(times[0]), median_of(times[1]), median_of(times[2])};
}

// The pass scales: the real layers' time over the model's, the geometric mean over two
// micro-batch sizes, for forward, input gradient and weight gradient.
void measure_pass_scales(Backend& backend, const ModelConfig& cfg, double budget, Cluster& c) {
  c.cpu.forward_scale = c.cpu.backward_input_scale = c.cpu.backward_weight_scale = 1;
  std::array<double, 3> log_sum{};
  const std::vector<int64_t> sizes = {1, 4};
  for (int64_t mb : sizes) {
    const std::array<double, 3> real = measure_layers(backend, cfg, mb, budget / 2);
    PlanLayout l;
    l.micro_batch = mb;
    l.precision = PrecisionRegime::kFp32;
    const ChunkCosts model = chunk_costs(cfg, l, c, 0);
    const std::array<double, 3> modelled = {model.forward.compute, model.backward_input.compute,
                                            model.backward_weight.compute};
    for (size_t i = 0; i < 3; ++i) log_sum[i] += std::log(real[i] / modelled[i]);
    std::printf(
        "calibrate: layers at micro-batch %lld: forward %.4f s (model %.4f), input gradient "
        "%.4f s (%.4f), weight gradient %.4f s (%.4f)\n",
        static_cast<long long>(mb), real[0], modelled[0], real[1], modelled[1], real[2],
        modelled[2]);
  }
  const double n = static_cast<double>(sizes.size());
  c.cpu.forward_scale = std::exp(log_sum[0] / n);
  c.cpu.backward_input_scale = std::exp(log_sum[1] / n);
  c.cpu.backward_weight_scale = std::exp(log_sum[2] / n);
}

// Median seconds of an all-reduce of `bytes` over the first `n` ranks (rank 0's view; the
// others join), or of a one-way message between ranks 0 and 1 (half a ping-pong) when p2p.
double measure_mpi(MPI_Comm world, int n, double bytes, bool p2p, double budget) {
  const int rank = comm_rank(world);
  MPI_Comm group;
  GPT_MPI_CHECK(MPI_Comm_split(world, rank < n ? 0 : MPI_UNDEFINED, rank, &group));
  double t = 0;
  if (group != MPI_COMM_NULL) {
    const int count = static_cast<int>(bytes / 4);
    std::vector<float> buf(static_cast<size_t>(count), 1.0f);
    int reps = 0;
    double t0 = 0;
    // Rank 0 decides how many repetitions fit the budget (the others follow its count).
    for (int rep = 0;; ++rep) {
      int go = rank == 0 && rep < 200 && (rep < 5 || now_seconds() - t0 < budget);
      GPT_MPI_CHECK(MPI_Bcast(&go, 1, MPI_INT, 0, group));
      if (!go) break;
      if (rep == 1) t0 = now_seconds();  // the first is a warm-up
      if (p2p) {
        if (rank == 0) {
          GPT_MPI_CHECK(MPI_Send(buf.data(), count, MPI_FLOAT, 1, 0, group));
          GPT_MPI_CHECK(MPI_Recv(buf.data(), count, MPI_FLOAT, 1, 0, group, MPI_STATUS_IGNORE));
        } else {
          GPT_MPI_CHECK(MPI_Recv(buf.data(), count, MPI_FLOAT, 0, 0, group, MPI_STATUS_IGNORE));
          GPT_MPI_CHECK(MPI_Send(buf.data(), count, MPI_FLOAT, 0, 0, group));
        }
      } else {
        GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, group));
      }
      reps = rep;
    }
    t = reps > 0 ? (now_seconds() - t0) / reps / (p2p ? 2 : 1) : 0;
    MPI_Comm_free(&group);
  }
  GPT_MPI_CHECK(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, world));
  return t;
}

// The intra-node link from all-reduces over 2 ranks (2 algorithm steps, bus bytes = the
// buffer): latency and bus bandwidth fitted to their times by size; then
// the measured all-reduces over larger groups and the messages beside the model's figures.
void measure_links(MPI_Comm world, double budget, Cluster& c) {
  const int ranks = comm_size(world);
  const std::vector<double> sizes = {4e3, 64e3, 1e6, 16e6};
  const double share = budget / (sizes.size() * 4);
  std::vector<double> two;
  for (double s : sizes) two.push_back(measure_mpi(world, 2, s, false, share));
  // Least squares of t = 2 a + S / B over the sizes (a line in S): robust to one noisy size,
  // where a curve point per size is not (a small message's median can exceed a larger one's on
  // a loaded machine). Intercept and slope kept positive.
  double mean_s = 0, mean_t = 0;
  for (size_t i = 0; i < sizes.size(); ++i) mean_s += sizes[i], mean_t += two[i];
  mean_s /= static_cast<double>(sizes.size());
  mean_t /= static_cast<double>(sizes.size());
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sxx += (sizes[i] - mean_s) * (sizes[i] - mean_s);
    sxy += (sizes[i] - mean_s) * (two[i] - mean_t);
  }
  const double slope = std::max(sxy / sxx, 1e-12);
  LinkModel& link = c.intra_node;
  link.curve.clear();
  link.bandwidth = 1 / slope;
  link.latency = std::max(0.0, (mean_t - slope * mean_s) / 2);
  c.inter_node = link;  // one machine: no second link to measure
  const bool root = comm_rank(world) == 0;
  for (int n = 2; n <= ranks; n *= 2)
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double s = sizes[i];
      const double t = n == 2 ? two[i] : measure_mpi(world, n, s, false, share / 2);
      if (root)
        std::printf("calibrate: all-reduce %.3g B over %d ranks: %.1f us (model %.1f)\n", s, n,
                    t * 1e6, collective_seconds(link, Collective::kAllReduce, s, n) * 1e6);
    }
  for (double s : sizes) {
    const double t = measure_mpi(world, 2, s, true, share / 2);
    if (root)
      std::printf("calibrate: send-recv %.3g B: %.1f us (model %.1f)\n", s, t * 1e6,
                  p2p_seconds(link, s) * 1e6);
  }
}

int online_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace

Cluster calibrate_cpu_cluster(MPI_Comm world, const PlanOptions& options) {
  GPT_INPUT_CHECK(comm_size(world) >= 2,
                  "--calibrate needs 2 or more ranks (mpiexec -n 2 plan --calibrate FILE) to "
                  "measure MPI");
  const double budget = options.calibrate_seconds;
  Cluster c;
  c.name = "cpu-calibrated";
  c.gpus_per_node = 64;  // rank slots on the one node: ranks beyond the cores share them
  c.cpu.cores = online_cores();
  c.cpu.threads = 1;
  c.gpu.name = "cpu-core";
  c.gpu.sms = 1;  // no tiles in waves: the GEMM curve carries the size effects
  c.gpu.memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  c.gpu.memory_efficiency = 1;
  if (comm_rank(world) == 0) {
    std::unique_ptr<Backend> backend = make_cpu_backend(1);
    measure_gemm(*backend, budget * 0.15, c.gpu);
    c.gpu.memory_bandwidth = measure_stream(budget * 0.05);
    measure_pass_scales(*backend, options.model, budget * 0.4, c);
  }
  GPT_MPI_CHECK(MPI_Barrier(world));
  measure_links(world, budget * 0.4, c);
  if (comm_rank(world) == 0) {
    std::ofstream out(options.calibrate);
    GPT_INPUT_CHECK(out.good(), "--calibrate " << options.calibrate << " cannot be written");
    out << "# plan --calibrate: this machine, " << c.cpu.cores << " cores, measured with "
        << comm_size(world) << " ranks and the model " << options.model.n_layer << " layers, d "
        << options.model.d_model << ", seq " << options.model.seq_len << " (docs/PLANNER.md)\n"
        << cluster_file_text(c);
    std::printf("calibrate: wrote %s\n", options.calibrate.c_str());
  }
  return c;
}

}  // namespace gpt
