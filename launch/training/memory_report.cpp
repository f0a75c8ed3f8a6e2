// train's memory prediction, limit, report and measurement (see memory_report.h).
#include "launch/training/memory_report.h"

#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/json.h"
#include "framework/logging.h"

namespace gpt {
namespace {

Json bytes_json(const MemoryBytes& bytes) {
  Json j = Json::object();
  for (MemoryCategory c : kAllMemoryCategories) j[memory_category_name(c)] = bytes[c];
  j["total"] = bytes.total();
  return j;
}

Json memory_event(const char* kind, const RankMemory& r) {
  return {{"event", "memory"},
          {"kind", kind},
          {"rank", r.rank},
          {"stage", r.coordinates.stage},
          {"bytes", bytes_json(r.bytes)}};
}

// Rank 0, then the heaviest rank of each stage that is not rank 0: the ranks the metrics file
// reports.
std::vector<RankMemory> reported_ranks(const std::vector<RankMemory>& all, int pp) {
  std::vector<RankMemory> out{all.front()};
  for (const RankMemory& r : heaviest_per_stage(all, pp))
    if (r.rank != 0) out.push_back(r);
  return out;
}

// What lowers a category, for the limit's message.
std::string remedy(MemoryCategory largest, Recompute recompute) {
  switch (largest) {
    case MemoryCategory::kActivations:
      if (recompute == Recompute::kNone)
        return "try --recompute selective (or full), more --pp, or a smaller --micro-batch-size";
      if (recompute == Recompute::kSelective)
        return "try --recompute full, more --pp, or a smaller --micro-batch-size";
      return "try more --pp or --tp, or a smaller --micro-batch-size";
    case MemoryCategory::kWorkspace:
      return "try a smaller --micro-batch-size or more --tp";
    default:
      return "try more --tp or --pp";
  }
}

}  // namespace

MemoryModelInput memory_model_input(const TrainOptions& o, int world_size, DeviceKind device) {
  MemoryModelInput in;
  in.model = o.model;
  in.layout = o.layout;
  in.layout.dp = o.layout.data_parallel(world_size);
  in.microbatches = o.layout.step_microbatches(o.global_batch_size, world_size);
  in.optimizer_states = o.optimizer == OptimizerKind::kAdamW ? 2 : 1;
  in.dp_bucket_elements = o.dp_bucket_elements;
  in.device = device;
  return in;
}

DeviceKind predicted_device(const ExecutionOptions& execution) {
  if (execution.device) return *execution.device;
  return cuda_device_count() > 0 ? DeviceKind::kCuda : DeviceKind::kCpu;
}

std::string memory_report_table(const MemoryModelInput& in) {
  std::ostringstream os;
  os << "predicted memory per rank (bytes; docs/MEMORY.md)\n";
  os << std::setw(5) << "rank" << std::setw(4) << "tp" << std::setw(4) << "dp" << std::setw(4)
     << "pp";
  for (MemoryCategory c : kAllMemoryCategories) os << std::setw(14) << memory_category_name(c);
  os << std::setw(14) << "total"
     << "\n";
  for (const RankMemory& r : predict_all_ranks(in)) {
    os << std::setw(5) << r.rank << std::setw(4) << r.coordinates.tp_rank << std::setw(4)
       << r.coordinates.dp_rank << std::setw(4) << r.coordinates.stage;
    for (MemoryCategory c : kAllMemoryCategories) os << std::setw(14) << r.bytes[c];
    os << std::setw(14) << r.bytes.total() << "\n";
  }
  const RankMemory heaviest = heaviest_rank(predict_all_ranks(in));
  os << "heaviest: rank " << heaviest.rank << " (pp stage " << heaviest.coordinates.stage << "), "
     << describe(heaviest.bytes);
  return os.str();
}

int64_t memory_limit_bytes(double limit_gb, DeviceKind device) {
  if (limit_gb > 0) return static_cast<int64_t>(limit_gb * 1e9);
  // On the CPU without a limit, the machine's memory is one: a run predicted above it would
  // fail allocating, or swap for hours, after building everything else.
  const int64_t pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return device == DeviceKind::kCpu && pages > 0 && page > 0 ? pages * page : 0;
}

void check_memory_limit(const MemoryModelInput& in, double limit_gb) {
  const bool machine = limit_gb <= 0;
  const int64_t limit = memory_limit_bytes(limit_gb, in.device);
  if (limit <= 0) return;
  const RankMemory r = heaviest_rank(predict_all_ranks(in));
  const MemoryCategory largest = r.bytes.largest();
  GPT_INPUT_CHECK(r.bytes.total() <= limit,
                  "rank " << r.rank << " (pp stage " << r.coordinates.stage << ") needs "
                          << format_bytes(r.bytes.total()) << " > " << format_bytes(limit)
                          << (machine ? std::string(" (this machine's memory), ")
                                      : GPT_MSG(" (--memory-limit-gb " << limit_gb << "), "))
                          << memory_category_name(largest) << " " << format_bytes(r.bytes[largest])
                          << ": " << remedy(largest, in.layout.recompute));
}

void log_predicted_memory(const MemoryModelInput& in, MetricsWriter& metrics) {
  const std::vector<RankMemory> all = predict_all_ranks(in);
  const RankMemory heaviest = heaviest_rank(all);
  GPT_LOG0("memory predicted, rank 0 (pp stage 0): " << describe(all.front().bytes));
  if (heaviest.rank != 0)
    GPT_LOG0("memory predicted, heaviest rank " << heaviest.rank << " (pp stage "
                                                << heaviest.coordinates.stage
                                                << "): " << describe(heaviest.bytes));
  for (const RankMemory& r : reported_ranks(all, in.layout.pp))
    metrics.write(memory_event("predicted", r));
}

void report_measured_memory(MPI_Comm world, const MemoryModelInput& in, const Backend& backend,
                            MetricsWriter& metrics) {
  const int rank = comm_rank(world);
  const std::vector<RankMemory> predicted = predict_all_ranks(in);
  const MemoryLedger& ledger = backend.memory();
  const MemoryBytes& expected = predicted[static_cast<size_t>(rank)].bytes;
  if (ledger.peak() != expected)
    log::info("warning: memory measured " + describe(ledger.peak()) +
              " differs from the prediction " + describe(expected));
  // Each rank's category peaks, the peak of their sum and its resident-set peak, to rank 0.
  std::vector<int64_t> mine(ledger.peak().bytes.begin(), ledger.peak().bytes.end());
  mine.push_back(ledger.peak_total());
  mine.push_back(resident_set_peak_bytes());
  const int per_rank = static_cast<int>(mine.size());
  std::vector<int64_t> all(rank == 0 ? mine.size() * static_cast<size_t>(comm_size(world)) : 0);
  GPT_MPI_CHECK(
      MPI_Gather(mine.data(), per_rank, MPI_INT64_T, all.data(), per_rank, MPI_INT64_T, 0, world));
  if (rank != 0) return;
  for (const RankMemory& r : reported_ranks(predicted, in.layout.pp)) {
    const int64_t* m = all.data() + static_cast<size_t>(r.rank) * mine.size();
    RankMemory measured = r;
    for (size_t c = 0; c < kMemoryCategories; ++c) measured.bytes.bytes[c] = m[c];
    Json event = memory_event("measured", measured);
    event["bytes"]["total"] = m[kMemoryCategories];  // the peak of the sum
    event["rss_peak_bytes"] = m[kMemoryCategories + 1];
    metrics.write(event);
    GPT_LOG0("memory measured, rank " << r.rank << " (pp stage " << r.coordinates.stage
                                      << "): " << describe(measured.bytes) << "; resident peak "
                                      << format_bytes(m[kMemoryCategories + 1]));
  }
}

int64_t resident_set_peak_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  return 0;
}

}  // namespace gpt
