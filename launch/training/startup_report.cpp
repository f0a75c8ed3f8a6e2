// The start-up report (see startup_report.h). Hosts are told apart by MPI's processor name (the
// host name, cut at the first dot), so the map shows where the launcher really put the ranks,
// whatever --ranks-per-node simulates.
#include "launch/training/startup_report.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "framework/agreement.h"
#include "framework/logging.h"

namespace gpt {
namespace {

constexpr int kHostChars = MPI_MAX_PROCESSOR_NAME;

// One host's share of the job, in order of its lowest global rank.
struct HostRanks {
  std::string host;
  std::vector<int> ranks;    // global ranks, ascending
  std::vector<int> threads;  // the CPU threads of each of those ranks
};

// "Slurm job 1234 (restart 1)", or what stands for it outside Slurm.
std::string job_line() {
  const char* id = std::getenv("SLURM_JOB_ID");
  if (id == nullptr || *id == '\0') return "job: not under Slurm (no SLURM_JOB_ID)";
  std::string line = std::string("job: Slurm job ") + id;
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  if (restarts != nullptr && *restarts != '\0' && std::string(restarts) != "0")
    line += std::string(" (restart ") + restarts + ")";
  return line;
}

// "0-3", "0,2,4-7": ascending ranks as ranges.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out << (i > 0 ? "," : "") << ranks[i];
    if (j > i) out << "-" << ranks[j];
    i = j + 1;
  }
  return out.str();
}

// "2 CPU threads per rank" or "1-4 CPU threads per rank".
std::string threads_text(const std::vector<int>& threads) {
  const auto [lo, hi] = std::minmax_element(threads.begin(), threads.end());
  std::ostringstream out;
  out << *lo;
  if (*hi != *lo) out << "-" << *hi;
  out << " CPU thread" << (*hi == 1 ? "" : "s") << " per rank";
  return out.str();
}

std::vector<HostRanks> hosts_of(const std::vector<std::string>& host_of_rank,
                                const std::vector<int>& threads_of_rank) {
  std::vector<HostRanks> hosts;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    auto it = std::find_if(hosts.begin(), hosts.end(),
                           [&](const HostRanks& h) { return h.host == host_of_rank[r]; });
    if (it == hosts.end()) it = hosts.insert(hosts.end(), HostRanks{host_of_rank[r], {}, {}});
    it->ranks.push_back(static_cast<int>(r));
    it->threads.push_back(threads_of_rank[r]);
  }
  return hosts;
}

}  // namespace

std::vector<ReportLine> startup_report_lines(const GridShape& shape,
                                             const std::vector<std::string>& host_of_rank,
                                             const std::vector<int>& threads_of_rank) {
  const std::vector<HostRanks> hosts = hosts_of(host_of_rank, threads_of_rank);
  std::vector<ReportLine> lines;
  std::ostringstream grid;
  grid << "grid: tp=" << shape.tp << " dp=" << shape.dp << " pp=" << shape.pp << " over "
       << shape.world() << " rank" << (shape.world() == 1 ? "" : "s") << " on " << hosts.size()
       << " host" << (hosts.size() == 1 ? "" : "s") << ", " << threads_text(threads_of_rank);
  lines.push_back({false, grid.str()});
  for (const HostRanks& h : hosts)
    lines.push_back({false, "node " + h.host + ": ranks " + rank_ranges(h.ranks) + " (" +
                                threads_text(h.threads) + ")"});
  // tp groups are consecutive global ranks; each should sit on one host (docs/DESIGN.md).
  int split_groups = 0;
  for (int first = 0; first < shape.world(); first += shape.tp) {
    std::vector<std::string> group_hosts;
    for (int r = first; r < first + shape.tp; ++r)
      if (std::find(group_hosts.begin(), group_hosts.end(), host_of_rank[r]) == group_hosts.end())
        group_hosts.push_back(host_of_rank[r]);
    if (group_hosts.size() == 1) continue;
    ++split_groups;
    std::ostringstream warning;
    warning << "tp group of ranks " << first << "-" << first + shape.tp - 1 << " spans hosts ";
    for (size_t i = 0; i < group_hosts.size(); ++i) warning << (i ? ", " : "") << group_hosts[i];
    warning << ": its all-reduces leave the node";
    lines.push_back({true, warning.str()});
  }
  if (split_groups == 0 && shape.tp > 1)
    lines.push_back(
        {false, "every tp group (" + std::to_string(shape.tp) + " ranks) is on one node"});
  return lines;
}

void print_startup_report(MPI_Comm world, const GridShape& shape, int threads) {
  const int size = comm_size(world);
  char name[kHostChars] = {};
  int length = 0;
  GPT_MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::string host(name, static_cast<size_t>(length));
  host = host.substr(0, host.find('.'));
  char mine[kHostChars] = {};
  host.copy(mine, sizeof(mine) - 1);
  std::vector<char> names(static_cast<size_t>(size) * kHostChars);
  GPT_MPI_CHECK(
      MPI_Gather(mine, kHostChars, MPI_CHAR, names.data(), kHostChars, MPI_CHAR, 0, world));
  std::vector<int> threads_of_rank(static_cast<size_t>(size));
  GPT_MPI_CHECK(MPI_Gather(&threads, 1, MPI_INT, threads_of_rank.data(), 1, MPI_INT, 0, world));
  if (comm_rank(world) != 0) return;
  std::vector<std::string> host_of_rank;
  for (int r = 0; r < size; ++r) host_of_rank.emplace_back(names.data() + r * kHostChars);
  log::info0(job_line());
  for (const ReportLine& line : startup_report_lines(shape, host_of_rank, threads_of_rank))
    (line.warning ? log::warn0 : log::info0)(line.text);
}

}  // namespace gpt
