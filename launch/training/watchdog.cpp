// The watchdog thread (watchdog.h): beat, notice a wait past the timeout, gather the heartbeats,
// report, abort.
#include "launch/training/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "framework/io/whole_file.h"
#include "framework/logging.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

fs::path heartbeat_path(const fs::path& directory, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.json", rank);
  return directory / name;
}

// Written whole and renamed, so a reader never sees half; false where it could not be.
bool publish(const fs::path& path, const Heartbeat& heartbeat) {
  try {
    write_file_atomically(
        path.string(),
        [&](std::ostream& out) { out << heartbeat_to_json(heartbeat).dump() << "\n"; }, false);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Every rank's newest heartbeat of this job (none where the file is missing, unreadable, or
// another job's).
std::vector<RankEvidence> read_heartbeats(const fs::path& directory, int world_size,
                                          const std::string& job) {
  std::vector<RankEvidence> evidence(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const std::optional<std::string> text = read_whole_file(heartbeat_path(directory, r));
    if (!text) continue;
    try {
      Heartbeat h = heartbeat_from_json(parse_json_object(*text, "heartbeat"), "heartbeat");
      if (h.job == job && h.rank == r) evidence[static_cast<size_t>(r)].heartbeat = std::move(h);
    } catch (const Error&) {
      // A damaged file reads as no heartbeat, which the report names.
    }
  }
  return evidence;
}

// The job id: rank 0's pid and start time, the same on every rank.
std::string agree_on_job_id(Communicator& world) {
  std::array<char, 64> id{};
  if (world.rank() == 0)
    std::snprintf(id.data(), id.size(), "%lld-%.6f", static_cast<long long>(getpid()), unix_now());
  world.broadcast_bytes(id.data(), static_cast<int64_t>(id.size()), 0);
  return id.data();
}

}  // namespace

Watchdog::Watchdog(ProcessGrid& grid, const std::string& directory, double timeout_s)
    : operations_(grid.operations()),
      directory_(directory),
      timeout_s_(timeout_s),
      world_size_(grid.shape().world()) {
  heartbeat_.job = agree_on_job_id(grid.world());
  heartbeat_.rank = grid.global_rank();
  heartbeat_.coordinates = {grid.tp_rank(), grid.dp_rank(), grid.stage()};
  heartbeat_.host = host_name();
  heartbeat_.pid = getpid();
  std::error_code ec;
  fs::create_directories(directory_, ec);
  GPT_INPUT_CHECK(!ec,
                  "cannot create the watchdog directory " << directory_ << ": " << ec.message());
  GPT_INPUT_CHECK(publish(heartbeat_path(directory_, heartbeat_.rank), heartbeat_),
                  "cannot write in the watchdog directory " << directory_);
  thread_ = std::thread([this] { watch(); });
}

int remove_stale_heartbeats(const std::string& directory) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(directory, ec)) {
    const std::string name = e.path().filename().string();
    const bool heartbeat =
        name.starts_with("rank-") && (name.ends_with(".json") || name.ends_with(".json.tmp"));
    std::error_code remove_error;
    if (heartbeat && e.is_regular_file(remove_error) && fs::remove(e.path(), remove_error))
      ++removed;
  }
  fs::remove(directory, ec);  // only an empty one goes
  return removed;
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::error_code ec;
  fs::remove(heartbeat_path(directory_, heartbeat_.rank), ec);
  fs::remove(directory_, ec);  // the last rank to leave removes it (only an empty one goes)
}

void Watchdog::watch() {
  // Beats often enough to see a stall well within the timeout, rarely enough that thousands of
  // ranks do not load the shared file system.
  const auto interval = std::chrono::duration<double>(std::clamp(timeout_s_ / 10.0, 0.5, 5.0));
  const auto grace = 2 * interval + std::chrono::seconds(1);
  const fs::path directory(directory_), mine = heartbeat_path(directory, heartbeat_.rank);
  Heartbeat h = heartbeat_;
  bool warned = false;
  Clock::time_point noticed_at;
  std::vector<RankEvidence> at_notice;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    ++h.beat;
    h.unix_time = unix_now();
    h.operations = operations_.snapshot();
    const bool noticed_now = !h.timed_out && !h.operations.blocked.empty() &&
                             h.operations.blocked.front().waited_s > timeout_s_;
    h.timed_out = h.timed_out || noticed_now;
    // A directory that is gone was removed by a rank that finished: the job is ending.
    if (!publish(mine, h) && !warned && fs::exists(directory)) {
      log::error("watchdog: cannot write " + mine.string() +
                 ": the other ranks cannot see this rank's progress");
      warned = true;
    }
    if (noticed_now) {
      noticed_at = Clock::now();
      at_notice = read_heartbeats(directory, world_size_, h.job);
    } else if (h.timed_out && Clock::now() - noticed_at >= grace) {
      end_job(at_notice, grace);
    }
    lock.lock();
    wake_.wait_for(lock, interval, [this] { return stopping_; });
  }
}

void Watchdog::end_job(const std::vector<RankEvidence>& at_notice,
                       std::chrono::duration<double> grace) {
  std::vector<RankEvidence> evidence = read_heartbeats(directory_, world_size_, heartbeat_.job);
  int reporter = -1;
  for (size_t r = 0; r < evidence.size(); ++r) {
    const std::optional<Heartbeat>& now = evidence[r].heartbeat;
    const std::optional<Heartbeat>& then = at_notice[r].heartbeat;
    evidence[r].beating = now && (!then || now->beat > then->beat);
    if (reporter < 0 && now && now->timed_out) reporter = static_cast<int>(r);
  }
  if (reporter < 0 || reporter == heartbeat_.rank) {
    std::string text = "watchdog: an operation waited longer than --comm-timeout " +
                       std::to_string(static_cast<int64_t>(timeout_s_)) +
                       " s; ending the job (exit code " + std::to_string(kExitWatchdog) + ")";
    for (const std::string& line : stall_report(evidence, timeout_s_, unix_now()))
      text += "\n  " + line;
    const fs::path report = fs::path(directory_) / "report.txt";
    std::ofstream(report, std::ios::trunc) << text << "\n";
    log::error(text + "\n  (also in " + report.string() + ")");
  } else {
    // The reporter aborts the job; waiting lets it finish writing first.
    std::this_thread::sleep_for(grace);
  }
  // MPI_Abort from this thread while the main one is inside MPI (a funneled library), and from
  // several ranks at once, can hang in the library: should it not have ended the process within
  // a grace, the process ends itself, and the launcher ends the job for that non-zero exit.
  std::thread([grace] {
    std::this_thread::sleep_for(4 * grace);
    std::_Exit(kExitWatchdog);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, kExitWatchdog);
  std::_Exit(kExitWatchdog);  // MPI_Abort does not return; should it, the job still ends
}

}  // namespace gpt
