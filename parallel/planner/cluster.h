// The planner's description of a GPU cluster (docs/PLANNER.md): the GPU (dense peak per
// precision, the share of it large GEMMs reach, memory size and bandwidth) and two links,
// inside a node and between nodes, each with bandwidth, latency and an optional bandwidth curve
// by message size, and a calibrated CPU's cores; the named presets with sourced figures, and
// --cluster FILE|PRESET. The INI file is cluster_file.h; what a transfer costs on a link is
// link_model.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpt {

// The units presets and cluster files give their figures in; plan prints memory in GB (1e9
// bytes) too, as train does.
inline constexpr double kGB = 1e9, kTFLOPS = 1e12, kUs = 1e-6;

struct LinkModel {
  double bandwidth = 0;  // bytes/s: peak bus bandwidth one GPU gets (NCCL's busbw)
  double latency = 0;    // seconds per algorithm step (one hop)
  // (message bytes, bus bandwidth bytes/s), sizes ascending: what NCCL reaches at that size.
  // Empty: `bandwidth` at every size.
  std::vector<std::pair<double, double>> curve;
  // The same, for a transfer one way while the other way is quiet (a binomial tree's rounds, a
  // pipeline's message): on a shaped link the reverse direction's queued data delays a
  // transfer's handshakes, so an exchange gets less than a one-way send; inside a calibrated CPU
  // node, a round of Open MPI's nonblocking all-reduce (plan --calibrate). Empty: the curve.
  std::vector<std::pair<double, double>> one_way_curve = {};
  // Bytes (at bus bandwidth, as the curve counts them) the link passes at once after it idled: a
  // token-bucket shaper's bucket (tc's tbf, a cloud instance's network allowance) refills while
  // the link is idle and lets that much through at line rate. 0: no shaper.
  double burst = 0;
  // The largest message whose send completes as soon as it is handed over (MPI's eager protocol:
  // Open MPI's shared memory 4 kB, its TCP 64 kB, headers included); a larger one's completes
  // only once its peer has received it. 0: every send waits for its receiver (NCCL).
  double eager_bytes = 0;
  // Set by group_link (never read from a file): the group spans nodes, so its transfers are
  // bound by the network, not by the CPU time of the ranks that drive them.
  bool crosses_nodes = false;

  // The bus bandwidth at a message of `bytes`: the curve, interpolated linearly in log(size)
  // and held at its end values outside it; `bandwidth` without a curve.
  double bus_bandwidth(double bytes) const;
  // one_way_curve's value at `bytes`, or bus_bandwidth's without it.
  double one_way_bandwidth(double bytes) const;
};

struct GpuModel {
  std::string name;
  // Dense (no sparsity) tensor-core peaks, FLOP/s: fp32 runs as TF32 where the GPU has it
  // (the CUDA backend's cuBLASLt fp32 path allows TF32), bf16 (and fp16) the 16-bit peak.
  double peak_fp32 = 0, peak_bf16 = 0;
  // The share of the peak the best-shaped large GEMM reaches (measured, see docs).
  double gemm_efficiency = 0.8;
  int sms = 108;  // streaming multiprocessors: GEMM tiles run in waves of this many
  double memory_bytes = 0;
  double memory_bandwidth = 0;     // bytes/s, peak
  double memory_efficiency = 0.8;  // the share of it streaming kernels reach
  // Optional (FLOPs of one product, share of the peak it reaches), FLOPs ascending: a measured
  // efficiency by product size, interpolated in log(FLOPs), used instead of gemm_efficiency
  // (the CPU, whose small products run far below its best; `plan --calibrate` writes it).
  std::vector<std::pair<double, double>> gemm_curve;
  // The fp32 peak of the CUDA cores (no tensor cores), FLOP/s, where this project's fused
  // attention kernel runs; 0 (a cluster file without it): the TF32 tensor peak, optimistic.
  double peak_fp32_cuda_core = 0;
  double gemm_efficiency_at(double flops) const;
  // The peak this project's attention kernel is priced at.
  double attention_kernel_peak() const {
    return peak_fp32_cuda_core > 0 ? peak_fp32_cuda_core : peak_fp32;
  }
};

// A CPU "cluster" (`plan --calibrate`, docs/PLANNER.md "Calibration"): a device is one rank's
// share of the cores. Each pass kind's modelled time is multiplied by the measured ratio of the
// real layers' time to the model's at the calibration shapes, by micro-batch size, and ranks
// beyond the cores share them: the figures here are data, priced by the core-sharing adapter
// (core_sharing.h).
struct CpuModel {
  int cores = 0;    // 0: not a CPU cluster (GPUs: no sharing, the GPU formulas alone)
  int threads = 1;  // OpenMP threads per rank, as train's --threads
  // Per pass kind, (micro-batch size, real over modelled time), sizes ascending, interpolated
  // linearly in log(size) and held at the end values outside them; empty: 1.
  using ScaleCurve = std::vector<std::pair<double, double>>;
  ScaleCurve forward_scale, backward_input_scale, backward_weight_scale;
  // A measured scale by micro-batch size and one more quantity `at`: points (micro-batch size,
  // at, scale), ascending by micro-batch then `at`; interpolated linearly in log(at) within a
  // micro-batch's points and held beyond them, then in log(micro-batch) as a pass scale.
  struct GridPoint {
    double micro_batch = 1, at = 1, scale = 1;
  };
  using ScaleGrid = std::vector<GridPoint>;
  // Ranks taking turns on a core run slower than processor sharing's `share` times their time
  // alone: each turn finds the caches refilled by the others. `at` is the ranks a core, the
  // scale time over processor sharing's; empty: 1 (docs/PLANNER.md, "Sharing the cores").
  ScaleGrid sharing_scale;
  // A rank holding fewer layers runs each faster than the whole model's pass scales say: its
  // weights and the activations its backward reads back stay nearer in the caches. `at` is the
  // layers a rank holds (a pipeline stage's, all its chunks), the scale a model of that many
  // layers' real-over-modelled time over the whole model's; empty: 1 (docs/PLANNER.md, "The
  // stage's size").
  ScaleGrid stage_scale;
  // Two ranks meeting (a blocking collective, a round of a nonblocking one, a pipeline message)
  // cost ranks taking turns on a core more than the transfer: the first to arrive yields its
  // core, and they meet only once the scheduler has run both, past the other ranks' turns. `at`
  // is the ranks a core, the scale the seconds each meeting adds per rank a core (the cost model
  // multiplies by the share as it does the transfer), measured by `plan --calibrate-turns` at
  // the blocking all-reduces of the calibration model at tp 2; empty: 0 (docs/PLANNER.md,
  // "Taking turns at a meeting").
  ScaleGrid turn_seconds;
  bool active() const { return cores > 0; }
  // `curve`'s scale at `micro_batch`.
  static double scale_at(const ScaleCurve& curve, double micro_batch);
  // sharing_scale at `share` ranks a core and `micro_batch`: 1 at a share of 1 or less, from 1 at
  // a share of 1 up to the measured shares.
  double sharing_at(double share, double micro_batch) const;
  // stage_scale for a rank holding `layers` layers at `micro_batch`.
  double stage_at(double layers, double micro_batch) const;
  // turn_seconds at `share` ranks a core and `micro_batch`: 0 at a share of 1 or less, from 0 at
  // a share of 1 up to the measured shares.
  double turn_at(double share, double micro_batch) const;
};

// The largest job plan prices: --nodes and a cluster file's gpus_per_node at most these (above
// the largest clusters built, and a world that fits an int with room to spare; the layout search
// grows with the world's divisors).
inline constexpr int kMaxNodes = 16384;
inline constexpr int kMaxGpusPerNode = 256;

struct Cluster {
  std::string name;
  GpuModel gpu;
  int gpus_per_node = 8;             // in [1, kMaxGpusPerNode]
  LinkModel intra_node, inter_node;  // inter_node: per GPU (its share of the node's NICs)
  CpuModel cpu;
  // plan --memory-headroom: what a rank needs beside the buffers the memory model predicts (the
  // CUDA context, NCCL's buffers, the allocator's slack; not part of a cluster file). A layout
  // fits when its prediction is within usable_memory_bytes().
  double memory_headroom_bytes = 0;
  double usable_memory_bytes() const { return gpu.memory_bytes - memory_headroom_bytes; }
};

// The preset names: dgx-a100, dgx-h100, h200, l40s-pcie.
std::vector<std::string> cluster_preset_names();
// A preset by name; a one-line input error naming --cluster for an unknown one.
Cluster cluster_preset(const std::string& name);
// --cluster FILE|PRESET: a readable file is parsed (cluster_file.h), otherwise the name must be a
// preset.
Cluster load_cluster(const std::string& file_or_preset);

// Where the job's ranks sit, as mpirun's --map-by: slot (the default) fills each node with
// consecutive ranks; node deals them round robin over `nodes` (rank r on node r % nodes), which
// puts a tp group of consecutive ranks across nodes.
struct RankPlacement {
  bool by_node = false;
  int nodes = 1;
};
}  // namespace gpt
