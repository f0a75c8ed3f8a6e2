// The cluster presets, --cluster FILE|PRESET, and the interpolation of the models' curves (see
// cluster.h). Each preset figure's source is in docs/PLANNER.md, "Presets".
#include "parallel/planner/cluster.h"

#include "parallel/planner/cluster_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/user_files.h"

namespace gpt {
namespace {

// Latency per algorithm step, NCCL's own tuning model (src/graph/tuning.cc, hwLat, ring
// algorithm, Simple protocol, the one large messages use): NVLink 3.4 us, PCIe 5.7, network 9.6.
constexpr double kNvlinkStep = 3.4 * kUs, kPcieStep = 5.7 * kUs, kNetworkStep = 9.6 * kUs;

// NCCL on NVLink 4 with NVSwitch (H100, H200): about 240 GB/s bus bandwidth at 16 MB and 480
// (NVLink SHARP all-reduce) from 8 GB; nccl-tests#212 (NCCL's maintainer) gives the 480 peak.
std::vector<std::pair<double, double>> nvlink4_curve() {
  return {{16e6, 240 * kGB}, {8e9, 480 * kGB}};
}

// GEMMs in training run at the GPU's power-limited, sustained clock, not at the boost clock of
// a short benchmark. S. Bekman's mamf-finder measures both on one H200 (bf16): 702.9 TFLOPS
// sustained (MSMF, after a thermal soak, near TDP) against 828.0 achievable in a burst (MAMF);
// B200 gives 1455.7 against 1732.6 (0.840). The burst figures below take this H200 ratio where
// only a burst figure was measured (A100, H100, the L40S's L20).
constexpr double kSustainedOverBurst = 702.9 / 828.0;

Cluster dgx_a100() {
  Cluster c;
  c.name = "dgx-a100";
  c.gpus_per_node = 8;
  c.gpu = {"A100-SXM4-80GB",
           156 * kTFLOPS,
           312 * kTFLOPS,
           267.9 / 312 * kSustainedOverBurst,
           108,
           80 * kGB,
           2039 * kGB,
           0.85,
           {}};
  c.gpu.peak_fp32_cuda_core = 19.5 * kTFLOPS;   // datasheet FP32 (non-tensor)
  c.intra_node = {200 * kGB, kNvlinkStep, {}};  // NVLink 3, nccl-tests#149: ~200 GB/s busbw
  c.inter_node = {24 * kGB, kNetworkStep, {}};  // 8x HDR 200 Gb/s: 25 GB/s per GPU, 96% reached
  return c;
}

Cluster dgx_h100() {
  Cluster c;
  c.name = "dgx-h100";
  c.gpus_per_node = 8;
  c.gpu = {"H100-SXM5-80GB",
           494.7 * kTFLOPS,
           989.4 * kTFLOPS,
           792.1 / 989.4 * kSustainedOverBurst,
           132,
           80 * kGB,
           3350 * kGB,
           0.85,
           {}};
  c.gpu.peak_fp32_cuda_core = 67 * kTFLOPS;  // datasheet FP32 (non-tensor)
  c.intra_node = {480 * kGB, kNvlinkStep, nvlink4_curve()};
  c.inter_node = {48 * kGB, kNetworkStep, {}};  // 8x NDR 400 Gb/s: 50 GB/s per GPU, 96% reached
  return c;
}

Cluster h200() {
  Cluster c = dgx_h100();
  c.name = "h200";
  c.gpu = {"H200-SXM-141GB",
           494.7 * kTFLOPS,
           989.4 * kTFLOPS,
           702.9 / 989.4,  // measured sustained
           132,
           141 * kGB,
           4800 * kGB,
           0.85,
           {}};
  c.gpu.peak_fp32_cuda_core = 67 * kTFLOPS;  // datasheet FP32 (non-tensor)
  return c;
}

Cluster l40s_pcie() {
  Cluster c;
  c.name = "l40s-pcie";
  c.gpus_per_node = 8;
  // GEMM efficiency: the low end of cuBLAS's on the L20, the same AD102 chip (docs/PLANNER.md).
  c.gpu = {"L40S-48GB", 183 * kTFLOPS, 362.05 * kTFLOPS, 0.88 * kSustainedOverBurst,
           142,         48 * kGB,      864 * kGB,        0.85,
           {}};
  c.gpu.peak_fp32_cuda_core = 91.6 * kTFLOPS;    // datasheet FP32 (non-tensor)
  c.intra_node = {20 * kGB, kPcieStep, {}};      // PCIe Gen4 x16, 31.5 GB/s a direction
  c.inter_node = {5.6 * kGB, kNetworkStep, {}};  // 400 Gb/s Ethernet per node, shared by 8 GPUs
  return c;
}

const std::map<std::string, std::function<Cluster()>>& presets() {
  static const std::map<std::string, std::function<Cluster()>> table = {
      {"dgx-a100", dgx_a100}, {"dgx-h100", dgx_h100}, {"h200", h200}, {"l40s-pcie", l40s_pcie}};
  return table;
}

std::string preset_list() {
  std::string list;
  for (const std::string& name : cluster_preset_names()) list += (list.empty() ? "" : " | ") + name;
  return list;
}

// A curve's value at x: linear in log(x) between its points, held at its ends.
double curve_at(const std::vector<std::pair<double, double>>& curve, double x) {
  if (x <= curve.front().first) return curve.front().second;
  if (x >= curve.back().first) return curve.back().second;
  for (size_t i = 1; i < curve.size(); ++i) {
    const auto& [hi_x, hi_y] = curve[i];
    if (x > hi_x) continue;
    const auto& [lo_x, lo_y] = curve[i - 1];
    const double t = std::log(x / lo_x) / std::log(hi_x / lo_x);
    return lo_y + t * (hi_y - lo_y);
  }
  return curve.back().second;
}

// A CpuModel::ScaleGrid at `at` and `micro_batch`; empty: `none`. `at_one`, where given: each
// micro-batch's points start from that value at `at` = 1 (no sharing: no cost).
double grid_at(const CpuModel::ScaleGrid& grid, double at, double micro_batch,
               std::optional<double> at_one, double none) {
  if (grid.empty()) return none;
  CpuModel::ScaleCurve by_micro_batch;  // each measured micro-batch's scale at `at`
  for (size_t i = 0; i < grid.size();) {
    const double mb = grid[i].micro_batch;
    std::vector<std::pair<double, double>> by_at;
    if (at_one) by_at.emplace_back(1, *at_one);
    for (; i < grid.size() && grid[i].micro_batch == mb; ++i)
      by_at.emplace_back(grid[i].at, grid[i].scale);
    by_micro_batch.emplace_back(mb, curve_at(by_at, at));
  }
  return curve_at(by_micro_batch, micro_batch);
}

}  // namespace

double CpuModel::scale_at(const ScaleCurve& curve, double micro_batch) {
  return curve.empty() ? 1 : curve_at(curve, micro_batch);
}

double CpuModel::sharing_at(double share, double micro_batch) const {
  if (share <= 1) return 1;
  return grid_at(sharing_scale, share, micro_batch, /*at_one=*/1, /*none=*/1);
}

double CpuModel::stage_at(double layers, double micro_batch) const {
  return grid_at(stage_scale, layers, micro_batch, /*at_one=*/std::nullopt, /*none=*/1);
}

double CpuModel::turn_at(double share, double micro_batch) const {
  if (share <= 1) return 0;
  return grid_at(turn_seconds, share, micro_batch, /*at_one=*/0, /*none=*/0);
}

double LinkModel::bus_bandwidth(double bytes) const {
  return curve.empty() ? bandwidth : curve_at(curve, bytes);
}

double LinkModel::one_way_bandwidth(double bytes) const {
  return one_way_curve.empty() ? bus_bandwidth(bytes) : curve_at(one_way_curve, bytes);
}

double GpuModel::gemm_efficiency_at(double flops) const {
  return gemm_curve.empty() ? gemm_efficiency : curve_at(gemm_curve, flops);
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : presets()) names.push_back(name);
  return names;
}

Cluster cluster_preset(const std::string& name) {
  const auto it = presets().find(name);
  GPT_INPUT_CHECK(it != presets().end(), "--cluster '" << shown_excerpt(name)
                                                       << "' is neither a readable file "
                                                       << "nor a preset (" << preset_list() << ")");
  return it->second();
}

Cluster load_cluster(const std::string& file_or_preset) {
  std::error_code ec;
  if (!std::filesystem::exists(file_or_preset, ec)) return cluster_preset(file_or_preset);
  require_regular_file(file_or_preset, "--cluster");
  std::ifstream in(file_or_preset);
  GPT_INPUT_CHECK(in.good(), "--cluster " << file_or_preset << ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_cluster_file(text.str(), "--cluster " + file_or_preset);
}

}  // namespace gpt
