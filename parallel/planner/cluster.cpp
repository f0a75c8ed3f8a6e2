// The cluster presets, the INI cluster file and the link model (see cluster.h). Each preset
// figure's source is in docs/PLANNER.md, "Presets".
#include "parallel/planner/cluster.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "framework/check.h"

namespace gpt {
namespace {

constexpr double kGB = 1e9, kTFLOPS = 1e12, kUs = 1e-6;

// Latency per algorithm step, NCCL's own tuning model (src/graph/tuning.cc, hwLat, ring
// algorithm, Simple protocol, the one large messages use): NVLink 3.4 us, PCIe 5.7, network 9.6.
constexpr double kNvlinkStep = 3.4 * kUs, kPcieStep = 5.7 * kUs, kNetworkStep = 9.6 * kUs;

// NCCL on NVLink 4 with NVSwitch (H100, H200): about 240 GB/s bus bandwidth at 16 MB and 480
// (NVLink SHARP all-reduce) from 8 GB; nccl-tests#212 (NCCL's maintainer) gives the 480 peak.
std::vector<std::pair<double, double>> nvlink4_curve() {
  return {{16e6, 240 * kGB}, {8e9, 480 * kGB}};
}

Cluster dgx_a100() {
  Cluster c;
  c.name = "dgx-a100";
  c.gpus_per_node = 8;
  c.gpu = {"A100-SXM4-80GB", 156 * kTFLOPS, 312 * kTFLOPS, 267.9 / 312, 108,
           80 * kGB,         2039 * kGB,    0.85,          {}};
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
           792.1 / 989.4,
           132,
           80 * kGB,
           3350 * kGB,
           0.85,
           {}};
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
           794.5 / 989.4,
           132,
           141 * kGB,
           4800 * kGB,
           0.85,
           {}};
  return c;
}

Cluster l40s_pcie() {
  Cluster c;
  c.name = "l40s-pcie";
  c.gpus_per_node = 8;
  // GEMM efficiency: the low end of cuBLAS's on the L20, the same AD102 chip (docs/PLANNER.md).
  c.gpu = {"L40S-48GB", 183 * kTFLOPS, 362.05 * kTFLOPS, 0.88, 142, 48 * kGB, 864 * kGB, 0.85, {}};
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

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") + 1 - begin);
}

// "16MB", "8GB", "4096", "64KiB": bytes.
double parse_size(const std::string& text, const std::string& where) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail_input(where + ": '" + text + "' is not a message size");
  }
  const std::string unit = trim(text.substr(used));
  static const std::map<std::string, double> units = {
      {"", 1},     {"B", 1},      {"KB", 1e3},      {"MB", 1e6},
      {"GB", 1e9}, {"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}};
  const auto it = units.find(unit);
  GPT_INPUT_CHECK(it != units.end() && value > 0,
                  where << ": '" << text << "' is not a message size (e.g. 16MB, 8GB)");
  return value * it->second;
}

double parse_number(const std::string& text, const std::string& where) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GPT_INPUT_CHECK(used > 0 && used == text.size() && std::isfinite(value) && value >= 0,
                  where << ": '" << text << "' is not a non-negative number");
  return value;
}

// "16MB:240, 8GB:480": (bytes, GB/s) pairs, sizes ascending; the values are multiplied by
// `scale` (kGB for bandwidths, 1 for the GEMM curve's shares and the pass scales). `form` names
// a point's parts in the error for a malformed one.
std::vector<std::pair<double, double>> parse_curve(const std::string& text,
                                                   const std::string& where, double scale = kGB,
                                                   const char* form = "SIZE:GBPS") {
  std::vector<std::pair<double, double>> curve;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t colon = item.find(':');
    GPT_INPUT_CHECK(colon != std::string::npos,
                    where << ": curve point '" << trim(item) << "' is not " << form);
    const double size = parse_size(trim(item.substr(0, colon)), where);
    const double bandwidth = parse_number(trim(item.substr(colon + 1)), where) * scale;
    GPT_INPUT_CHECK(bandwidth > 0, where << ": a curve value must be above 0");
    GPT_INPUT_CHECK(curve.empty() || size > curve.back().first,
                    where << ": curve sizes must ascend");
    curve.emplace_back(size, bandwidth);
  }
  GPT_INPUT_CHECK(!curve.empty(), where << ": an empty curve");
  return curve;
}

// Every key a cluster file may set, "section.key" -> what it writes.
using Setter = std::function<void(Cluster&, const std::string& value, const std::string& where)>;

void add_link_keys(std::map<std::string, Setter>& keys, const std::string& section,
                   LinkModel Cluster::*link) {
  keys[section + ".bandwidth_gbs"] = [link](Cluster& c, const std::string& v,
                                            const std::string& w) {
    (c.*link).bandwidth = parse_number(v, w) * kGB;
  };
  keys[section + ".latency_us"] = [link](Cluster& c, const std::string& v, const std::string& w) {
    (c.*link).latency = parse_number(v, w) * kUs;
  };
  keys[section + ".curve"] = [link](Cluster& c, const std::string& v, const std::string& w) {
    (c.*link).curve = parse_curve(v, w);
  };
  keys[section + ".one_way_curve"] = [link](Cluster& c, const std::string& v,
                                            const std::string& w) {
    (c.*link).one_way_curve = parse_curve(v, w);
  };
  keys[section + ".burst_kb"] = [link](Cluster& c, const std::string& v, const std::string& w) {
    (c.*link).burst = parse_number(v, w) * 1e3;
    GPT_INPUT_CHECK((c.*link).burst >= 0, w << ": a burst cannot be negative");
  };
  keys[section + ".eager_kb"] = [link](Cluster& c, const std::string& v, const std::string& w) {
    (c.*link).eager_bytes = parse_number(v, w) * 1e3;
    GPT_INPUT_CHECK((c.*link).eager_bytes >= 0, w << ": an eager limit cannot be negative");
  };
}

// [cpu]: cores, threads per rank and the three pass scales (cluster.h, CpuModel).
void add_cpu_keys(std::map<std::string, Setter>& keys) {
  const auto count = [&keys](const std::string& key, int CpuModel::*field) {
    keys[key] = [field](Cluster& c, const std::string& v, const std::string& w) {
      const double n = parse_number(v, w);
      GPT_INPUT_CHECK(n >= 1 && n == std::floor(n), w << ": " << v << " is not a count");
      c.cpu.*field = static_cast<int>(n);
    };
  };
  count("cpu.cores", &CpuModel::cores);
  count("cpu.threads", &CpuModel::threads);
  // "1:1.31, 4:1.27" (micro-batch: scale), or one number for every micro-batch.
  const auto scale = [&keys](const std::string& key, CpuModel::ScaleCurve CpuModel::*field) {
    keys[key] = [field](Cluster& c, const std::string& v, const std::string& w) {
      if (v.find(':') != std::string::npos) {
        c.cpu.*field = parse_curve(v, w, 1, "MICROBATCH:SCALE");
      } else {
        const double n = parse_number(v, w);
        GPT_INPUT_CHECK(n > 0, w << ": a pass scale must be above 0");
        c.cpu.*field = {{1, n}};
      }
    };
  };
  scale("cpu.forward_scale", &CpuModel::forward_scale);
  scale("cpu.backward_input_scale", &CpuModel::backward_input_scale);
  scale("cpu.backward_weight_scale", &CpuModel::backward_weight_scale);
  // "1x2:1.21, 1x4:1.30, 4x2:1.02": micro-batch x `at` (ranks a core, layers a rank holds): scale.
  const auto grid = [&keys](const std::string& key, CpuModel::ScaleGrid CpuModel::*field,
                            const char* what, const char* form, const char* at_name,
                            const char* at_rule, double least_at, bool zero_scale = false) {
    keys[key] = [=](Cluster& c, const std::string& v, const std::string& w) {
      CpuModel::ScaleGrid& points = c.cpu.*field;
      points.clear();
      std::stringstream items(v);
      std::string item;
      while (std::getline(items, item, ',')) {
        const size_t x = item.find('x'), colon = item.find(':');
        GPT_INPUT_CHECK(x != std::string::npos && colon != std::string::npos && x < colon,
                        w << ": " << what << " point '" << trim(item) << "' is not " << form);
        CpuModel::GridPoint p;
        p.micro_batch = parse_number(trim(item.substr(0, x)), w);
        p.at = parse_number(trim(item.substr(x + 1, colon - x - 1)), w);
        p.scale = parse_number(trim(item.substr(colon + 1)), w);
        GPT_INPUT_CHECK(
            p.micro_batch >= 1 && p.at >= least_at && (p.scale > 0 || (zero_scale && p.scale == 0)),
            w << ": " << what << " point '" << trim(item) << "' needs a micro-batch of 1 or more, "
              << at_rule << ", a " << (zero_scale ? "value of 0 or more" : "scale above 0"));
        GPT_INPUT_CHECK(
            points.empty() || p.micro_batch > points.back().micro_batch ||
                (p.micro_batch == points.back().micro_batch && p.at > points.back().at),
            w << ": " << what << " points must ascend by micro-batch, then " << at_name);
        points.push_back(p);
      }
      GPT_INPUT_CHECK(!points.empty(), w << ": no " << what << " points");
    };
  };
  // A share of exactly 1 is no sharing: its scale is 1 by definition.
  grid("cpu.sharing_scale", &CpuModel::sharing_scale, "sharing", "MICROBATCHxSHARE:SCALE", "share",
       "a share above 1", std::nextafter(1.0, 2.0));
  grid("cpu.stage_scale", &CpuModel::stage_scale, "stage", "MICROBATCHxLAYERS:SCALE", "layers",
       "1 layer or more", 1);
  grid("cpu.turn_seconds", &CpuModel::turn_seconds, "turn", "MICROBATCHxSHARE:SECONDS", "share",
       "a share above 1", std::nextafter(1.0, 2.0), /*zero_scale=*/true);
}

const std::map<std::string, Setter>& file_keys() {
  static const std::map<std::string, Setter> keys = [] {
    std::map<std::string, Setter> k;
    k["name"] = [](Cluster& c, const std::string& v, const std::string&) { c.name = v; };
    k["gpus_per_node"] = [](Cluster& c, const std::string& v, const std::string& w) {
      const double n = parse_number(v, w);
      GPT_INPUT_CHECK(n >= 1 && n == std::floor(n), w << ": gpus_per_node must be a count");
      c.gpus_per_node = static_cast<int>(n);
    };
    k["gpu.name"] = [](Cluster& c, const std::string& v, const std::string&) { c.gpu.name = v; };
    const auto number = [&k](const std::string& key, double scale, double GpuModel::*field) {
      k[key] = [scale, field](Cluster& c, const std::string& v, const std::string& w) {
        c.gpu.*field = parse_number(v, w) * scale;
      };
    };
    number("gpu.peak_bf16_tflops", kTFLOPS, &GpuModel::peak_bf16);
    number("gpu.peak_fp32_tflops", kTFLOPS, &GpuModel::peak_fp32);
    number("gpu.gemm_efficiency", 1, &GpuModel::gemm_efficiency);
    number("gpu.memory_gb", kGB, &GpuModel::memory_bytes);
    number("gpu.memory_bandwidth_gbs", kGB, &GpuModel::memory_bandwidth);
    number("gpu.memory_efficiency", 1, &GpuModel::memory_efficiency);
    k["gpu.sms"] = [](Cluster& c, const std::string& v, const std::string& w) {
      c.gpu.sms = std::max(1, static_cast<int>(parse_number(v, w)));
    };
    k["gpu.gemm_curve"] = [](Cluster& c, const std::string& v, const std::string& w) {
      c.gpu.gemm_curve = parse_curve(v, w, 1, "FLOPS:SHARE");
      for (const auto& [flops, share] : c.gpu.gemm_curve)
        GPT_INPUT_CHECK(share <= 1, w << ": a gemm_curve share must be in (0, 1]");
    };
    add_cpu_keys(k);
    add_link_keys(k, "intra_node", &Cluster::intra_node);
    add_link_keys(k, "inter_node", &Cluster::inter_node);
    return k;
  }();
  return keys;
}

// The figures a cluster file must end with, checked after parsing.
void check_cluster(const Cluster& c, const std::string& what) {
  const auto positive = [&](double value, const char* key) {
    GPT_INPUT_CHECK(value > 0, what << ": " << key << " must be given and above 0");
  };
  positive(c.gpu.peak_bf16, "gpu.peak_bf16_tflops");
  positive(c.gpu.peak_fp32, "gpu.peak_fp32_tflops");
  positive(c.gpu.memory_bytes, "gpu.memory_gb");
  positive(c.gpu.memory_bandwidth, "gpu.memory_bandwidth_gbs");
  positive(c.intra_node.bandwidth, "intra_node.bandwidth_gbs");
  positive(c.inter_node.bandwidth, "inter_node.bandwidth_gbs");
  GPT_INPUT_CHECK(c.gpu.gemm_efficiency > 0 && c.gpu.gemm_efficiency <= 1,
                  what << ": gpu.gemm_efficiency must be in (0, 1]");
  GPT_INPUT_CHECK(c.gpu.memory_efficiency > 0 && c.gpu.memory_efficiency <= 1,
                  what << ": gpu.memory_efficiency must be in (0, 1]");
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

std::string curve_text(const std::vector<std::pair<double, double>>& curve, double scale) {
  std::ostringstream out;
  out.precision(6);
  for (size_t i = 0; i < curve.size(); ++i)
    out << (i ? ", " : "") << curve[i].first << ":" << curve[i].second / scale;
  return out.str();
}

// A pass scale as the file writes it: its curve, or 1 where it has none.
std::string scale_text(const CpuModel::ScaleCurve& curve) {
  return curve.empty() ? "1" : curve_text(curve, 1);
}

void write_link(std::ostream& out, const char* section, const LinkModel& link) {
  out << "[" << section << "]\nbandwidth_gbs = " << link.bandwidth / kGB
      << "\nlatency_us = " << link.latency / kUs << "\n";
  if (!link.curve.empty()) out << "curve = " << curve_text(link.curve, kGB) << "\n";
  if (!link.one_way_curve.empty())
    out << "one_way_curve = " << curve_text(link.one_way_curve, kGB) << "\n";
  if (link.burst > 0) out << "burst_kb = " << link.burst / 1e3 << "\n";
  if (link.eager_bytes > 0) out << "eager_kb = " << link.eager_bytes / 1e3 << "\n";
}

// Seconds of a transfer's `wire` time (bus bytes over bandwidth) that a shaped link's bucket,
// refilled at the link's rate over `idle` seconds up to its burst, passes at once.
double burst_credit(const LinkModel& link, double bytes, double wire, double idle) {
  if (link.burst <= 0 || idle <= 0) return 0;
  return std::min({wire, idle, link.burst / link.bus_bandwidth(bytes)});
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

// A CpuModel::ScaleGrid as the file writes it.
std::string grid_text(const CpuModel::ScaleGrid& grid) {
  std::ostringstream out;
  out.precision(6);
  for (size_t i = 0; i < grid.size(); ++i)
    out << (i ? ", " : "") << grid[i].micro_batch << "x" << grid[i].at << ":" << grid[i].scale;
  return out.str();
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

std::string cluster_file_text(const Cluster& c) {
  std::ostringstream out;
  out.precision(6);
  out << "name = " << c.name << "\ngpus_per_node = " << c.gpus_per_node
      << "\n[gpu]\nname = " << c.gpu.name << "\npeak_bf16_tflops = " << c.gpu.peak_bf16 / kTFLOPS
      << "\npeak_fp32_tflops = " << c.gpu.peak_fp32 / kTFLOPS
      << "\ngemm_efficiency = " << c.gpu.gemm_efficiency << "\nsms = " << c.gpu.sms
      << "\nmemory_gb = " << c.gpu.memory_bytes / kGB
      << "\nmemory_bandwidth_gbs = " << c.gpu.memory_bandwidth / kGB
      << "\nmemory_efficiency = " << c.gpu.memory_efficiency << "\n";
  if (!c.gpu.gemm_curve.empty()) out << "gemm_curve = " << curve_text(c.gpu.gemm_curve, 1) << "\n";
  write_link(out, "intra_node", c.intra_node);
  write_link(out, "inter_node", c.inter_node);
  if (!c.cpu.active()) return out.str();
  out << "[cpu]\ncores = " << c.cpu.cores << "\nthreads = " << c.cpu.threads
      << "\nforward_scale = " << scale_text(c.cpu.forward_scale)
      << "\nbackward_input_scale = " << scale_text(c.cpu.backward_input_scale)
      << "\nbackward_weight_scale = " << scale_text(c.cpu.backward_weight_scale) << "\n";
  if (!c.cpu.sharing_scale.empty())
    out << "sharing_scale = " << grid_text(c.cpu.sharing_scale) << "\n";
  if (!c.cpu.stage_scale.empty()) out << "stage_scale = " << grid_text(c.cpu.stage_scale) << "\n";
  if (!c.cpu.turn_seconds.empty())
    out << "turn_seconds = " << grid_text(c.cpu.turn_seconds) << "\n";
  return out.str();
}

double collective_seconds(const LinkModel& link, Collective op, double bytes, int ranks,
                          double idle) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks, share = (n - 1) / n, bw = link.bus_bandwidth(bytes);
  switch (op) {
    case Collective::kAllReduce: {
      const double ring = 2 * (n - 1) * link.latency;
      const double tree = 2 * std::ceil(std::log2(n)) * link.latency;
      const double wire = 2 * share * bytes / bw;
      return std::min(ring, tree) + wire - burst_credit(link, bytes, wire, idle);
    }
    case Collective::kAllGather:
    case Collective::kReduceScatter: {
      const double wire = share * bytes / bw;
      return (n - 1) * link.latency + wire - burst_credit(link, bytes, wire, idle);
    }
  }
  return 0;
}

double p2p_seconds(const LinkModel& link, double bytes, double idle) {
  if (bytes <= 0) return 0;
  const double wire = bytes / link.one_way_bandwidth(bytes);
  return link.latency + wire - burst_credit(link, bytes, wire, idle);
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : presets()) names.push_back(name);
  return names;
}

Cluster cluster_preset(const std::string& name) {
  const auto it = presets().find(name);
  GPT_INPUT_CHECK(it != presets().end(), "--cluster '" << name << "' is neither a readable file "
                                                       << "nor a preset (" << preset_list() << ")");
  return it->second();
}

Cluster parse_cluster_file(const std::string& text, const std::string& what) {
  Cluster c;
  c.gpu = GpuModel{};
  c.intra_node = c.inter_node = LinkModel{};
  std::stringstream lines(text);
  std::string line, section;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string where = GPT_MSG(what << " line " << number);
    line = trim(line.substr(0, line.find_first_of("#;")));
    if (line.empty()) continue;
    if (line.front() == '[') {
      GPT_INPUT_CHECK(line.back() == ']', where << ": '" << line << "' is not a [section]");
      section = trim(line.substr(1, line.size() - 2));
      GPT_INPUT_CHECK(
          section == "gpu" || section == "intra_node" || section == "inter_node" ||
              section == "cpu",
          where << ": unknown section [" << section << "] (gpu, intra_node, inter_node, cpu)");
      continue;
    }
    const size_t eq = line.find('=');
    GPT_INPUT_CHECK(eq != std::string::npos, where << ": '" << line << "' is not name = value");
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (section.empty() && key == "base") {
      const std::string name = c.name;
      c = cluster_preset(value);  // start from a preset, the lines below override it
      if (!name.empty()) c.name = name;
      continue;
    }
    const std::string full = section.empty() ? key : section + "." + key;
    const auto it = file_keys().find(full);
    GPT_INPUT_CHECK(it != file_keys().end(), where << ": unknown key '" << full << "'");
    it->second(c, value, where);
  }
  if (c.name.empty()) c.name = what;
  check_cluster(c, what);
  return c;
}

Cluster load_cluster(const std::string& file_or_preset) {
  std::ifstream in(file_or_preset);
  if (!in.good()) return cluster_preset(file_or_preset);
  std::stringstream text;
  text << in.rdbuf();
  return parse_cluster_file(text.str(), "--cluster " + file_or_preset);
}

LinkModel group_link(const Cluster& cluster, int ranks, int stride, const RankPlacement& placement,
                     int concurrent) {
  const int g = cluster.gpus_per_node;
  if (ranks <= 1 || stride <= 0) return cluster.intra_node;  // no transfer between nodes
  int per_node = 0;  // the group's members on one node; 0 while it stays inside one
  if (placement.by_node && placement.nodes > 1) {
    // Members i * stride (plus the group's first rank) visit nodes i * stride mod nodes: as many
    // distinct nodes as nodes / gcd(stride, nodes), at most `ranks`.
    const int nodes_touched = std::min(ranks, placement.nodes / std::gcd(stride, placement.nodes));
    if (nodes_touched > 1) per_node = (ranks + nodes_touched - 1) / nodes_touched;
  } else {
    const int64_t span = static_cast<int64_t>(ranks - 1) * stride + 1;
    // Groups start at multiples of their block; a group stays in a node when its span does.
    if (!(span <= g && g % std::min<int64_t>(g, static_cast<int64_t>(ranks) * stride) == 0))
      per_node = std::max(1, std::min(ranks, g / std::max(1, stride)));
  }
  if (per_node == 0) return cluster.intra_node;
  LinkModel link = cluster.inter_node;
  link.crosses_nodes = true;
  // Each member on a node drives its own NIC, so their shares add, up to what NVLink carries.
  const double intra = cluster.intra_node.bus_bandwidth(1e12);
  double scale = per_node;
  if (cluster.cpu.active()) {
    // A CPU cluster's collectives are Open MPI's: its all-reduce halves and doubles with the
    // nearest partners first, so the data crossing between k nodes is 2(k-1)/k of the buffer a
    // node, where a ring (NCCL, the model's bus bytes) moves 2(n-1)/n over its crossing edge:
    // the link serves the n-rank collective as if (n-1)/n / ((k-1)/k) times faster. (Measured
    // with scripts/netns: tp 4 over 2 nodes moves the buffer once each way, not 1.5 times.)
    const int k = (ranks + per_node - 1) / per_node;
    scale *= ((ranks - 1.0) / ranks) / ((k - 1.0) / k);
    if (concurrent > 0)
      scale *= static_cast<double>(g) / std::max(concurrent, per_node);  // the node's one link
  }
  link.bandwidth = std::min(intra, link.bandwidth * scale);
  for (auto* curve : {&link.curve, &link.one_way_curve})
    for (auto& [size, bw] : *curve) bw = std::min(intra, bw * scale);
  link.burst *= scale;  // each member's share of the bucket, as of the bandwidth
  link.latency = std::max(cluster.intra_node.latency, link.latency);
  return link;
}

int ranks_per_node(const Cluster& cluster, int world, const RankPlacement& placement) {
  if (placement.by_node && placement.nodes > 1)
    return (world + placement.nodes - 1) / placement.nodes;
  return std::min(world, cluster.gpus_per_node);
}

}  // namespace gpt
