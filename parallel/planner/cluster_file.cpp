// The INI cluster file read and written (see cluster_file.h).
#include "parallel/planner/cluster_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "framework/check.h"
#include "framework/json.h"

namespace gpt {
namespace {

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
    fail_input(where + ": '" + shown_excerpt(text) + "' is not a message size");
  }
  const std::string unit = trim(text.substr(used));
  static const std::map<std::string, double> units = {
      {"", 1},     {"B", 1},      {"KB", 1e3},      {"MB", 1e6},
      {"GB", 1e9}, {"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}};
  const auto it = units.find(unit);
  GPT_INPUT_CHECK(
      it != units.end() && value > 0,
      where << ": '" << shown_excerpt(text) << "' is not a message size (e.g. 16MB, 8GB)");
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
                  where << ": '" << shown_excerpt(text) << "' is not a non-negative number");
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
                    where << ": curve point '" << shown_excerpt(trim(item)) << "' is not " << form);
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
        GPT_INPUT_CHECK(
            x != std::string::npos && colon != std::string::npos && x < colon,
            w << ": " << what << " point '" << shown_excerpt(trim(item)) << "' is not " << form);
        CpuModel::GridPoint p;
        p.micro_batch = parse_number(trim(item.substr(0, x)), w);
        p.at = parse_number(trim(item.substr(x + 1, colon - x - 1)), w);
        p.scale = parse_number(trim(item.substr(colon + 1)), w);
        GPT_INPUT_CHECK(
            p.micro_batch >= 1 && p.at >= least_at && (p.scale > 0 || (zero_scale && p.scale == 0)),
            w << ": " << what << " point '" << shown_excerpt(trim(item))
              << "' needs a micro-batch of 1 or more, " << at_rule << ", a "
              << (zero_scale ? "value of 0 or more" : "scale above 0"));
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
      GPT_INPUT_CHECK(n >= 1 && n <= kMaxGpusPerNode && n == std::floor(n),
                      w << ": gpus_per_node must be a count in [1, " << kMaxGpusPerNode << "]");
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
    number("gpu.peak_fp32_cuda_core_tflops", kTFLOPS, &GpuModel::peak_fp32_cuda_core);
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

// A CpuModel::ScaleGrid as the file writes it.
std::string grid_text(const CpuModel::ScaleGrid& grid) {
  std::ostringstream out;
  out.precision(6);
  for (size_t i = 0; i < grid.size(); ++i)
    out << (i ? ", " : "") << grid[i].micro_batch << "x" << grid[i].at << ":" << grid[i].scale;
  return out.str();
}

}  // namespace

std::string cluster_file_text(const Cluster& c) {
  std::ostringstream out;
  out.precision(6);
  out << "name = " << c.name << "\ngpus_per_node = " << c.gpus_per_node
      << "\n[gpu]\nname = " << c.gpu.name << "\npeak_bf16_tflops = " << c.gpu.peak_bf16 / kTFLOPS
      << "\npeak_fp32_tflops = " << c.gpu.peak_fp32 / kTFLOPS
      << "\npeak_fp32_cuda_core_tflops = " << c.gpu.peak_fp32_cuda_core / kTFLOPS
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
      GPT_INPUT_CHECK(line.back() == ']',
                      where << ": '" << shown_excerpt(line) << "' is not a [section]");
      section = trim(line.substr(1, line.size() - 2));
      GPT_INPUT_CHECK(section == "gpu" || section == "intra_node" || section == "inter_node" ||
                          section == "cpu",
                      where << ": unknown section [" << shown_excerpt(section)
                            << "] (gpu, intra_node, inter_node, cpu)");
      continue;
    }
    const size_t eq = line.find('=');
    GPT_INPUT_CHECK(eq != std::string::npos,
                    where << ": '" << shown_excerpt(line) << "' is not name = value");
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (section.empty() && key == "base") {
      const std::string name = c.name;
      c = cluster_preset(value);  // start from a preset, the lines below override it
      if (!name.empty()) c.name = name;
      continue;
    }
    const std::string full = section.empty() ? key : section + "." + key;
    const auto it = file_keys().find(full);
    GPT_INPUT_CHECK(it != file_keys().end(),
                    where << ": unknown key '" << shown_excerpt(full) << "'");
    it->second(c, value, where);
  }
  if (c.name.empty()) c.name = what;
  check_cluster(c, what);
  return c;
}

}  // namespace gpt
