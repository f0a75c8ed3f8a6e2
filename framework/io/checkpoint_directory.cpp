// The checkpoint folder (checkpoint_directory.h): the step-%08d.h5 names, the `latest` pointer,
// keep_last pruning, the temporaries of interrupted writes and the search for the checkpoint to
// resume from.
#include "framework/io/checkpoint_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "framework/check.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/logging.h"
#include "framework/user_files.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// Step number of a "step-<digits>.h5" file name, or -1.
int64_t parse_step_file(const std::string& name) {
  const std::string prefix = "step-", suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix))
    return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const bool all_digits =
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits.size() > 18 || !all_digits) return -1;
  return std::stoll(digits);
}

// step-*.h5 files of dir, newest (highest step) first.
std::vector<std::pair<int64_t, fs::path>> step_files(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = parse_step_file(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) files.emplace_back(step, e.path());
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a > b; });
  return files;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "step-%08lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  GPT_INPUT_CHECK(fd >= 0, "cannot open " << path << " to sync it");
  int rc = ::fsync(fd);
  ::close(fd);
  GPT_INPUT_CHECK(rc == 0, "fsync of " << path << " failed");
}

void point_latest_at(const std::string& dir, const std::string& final_path) {
  std::error_code ec;
  const std::string latest = (fs::path(dir) / "latest").string(), latest_temp = latest + ".tmp";
  {
    std::ofstream out(latest_temp, std::ios::trunc);
    out << fs::path(final_path).filename().string() << "\n";
    out.close();
    GPT_INPUT_CHECK(out.good(), "cannot write " << latest_temp);
  }
  fsync_path(latest_temp, false);
  fs::rename(latest_temp, latest, ec);
  GPT_INPUT_CHECK(!ec, "cannot rename " << latest_temp << " to " << latest << ": " << ec.message());
  fsync_path(dir, true);
}

void check_pointer_entries(const std::string& dir) {
  for (const char* name : {"latest", "latest.tmp"}) {
    const fs::path path = fs::path(dir) / name;
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(path, ec);
    if (!fs::exists(status)) continue;
    const bool usable =
        name == std::string("latest") ? !fs::is_directory(status) : fs::is_regular_file(status);
    GPT_INPUT_CHECK(usable, "--checkpoint-dir " << dir << ": " << path.string()
                                                << " is not a file (the folder's `latest` is a "
                                                   "one-line file naming the newest checkpoint, "
                                                   "replaced at every save); move it away");
  }
}

std::vector<std::string> step_file_names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& [step, path] : step_files(dir)) names.push_back(path.filename().string());
  return names;
}

CheckpointFolderLock::CheckpointFolderLock(const std::string& dir)
    : path_((fs::path(dir) / ".lock").string()) {
  // A few tries: each one that fails for the file's removal met a run letting its lock go.
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    GPT_INPUT_CHECK(fd_ >= 0, "--checkpoint-dir " << dir << ": cannot create " << path_);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      fail_input(GPT_MSG("--checkpoint-dir " << dir << " is in use by another run (it holds "
                                             << path_ << "); give this run another folder"));
    }
    struct stat locked {
    }, named{};
    if (::fstat(fd_, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 &&
        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino)
      return;
    ::close(fd_);
    fd_ = -1;
  }
  fail_input(GPT_MSG("--checkpoint-dir " << dir << ": cannot take the lock " << path_
                                         << " (it keeps being removed)"));
}

CheckpointFolderLock::~CheckpointFolderLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: nobody can hold the name's lock meanwhile
  ::close(fd_);             // releases the lock
}

bool VerifiedCheckpoints::verifies(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  const int64_t modified = fs::last_write_time(path, ec).time_since_epoch().count();
  const auto key = std::make_tuple(fs::path(path).filename().string(), bytes, modified);
  if (const auto known = files_.find(key); !ec && known != files_.end()) return known->second;
  bool valid = true;
  try {
    CheckpointReader reader(path);
    reader.verify(MPI_COMM_SELF);
  } catch (const Error& e) {
    GPT_WARN0("--keep-last: " << e.what() << "; not counted as a kept checkpoint, left in place");
    valid = false;
  }
  if (!ec) files_[key] = valid;
  return valid;
}

void remove_beyond_keep_last(const std::string& dir, const std::string& final_path, int keep_last,
                             VerifiedCheckpoints* verified) {
  if (keep_last <= 0) return;
  VerifiedCheckpoints once;
  VerifiedCheckpoints& check = verified != nullptr ? *verified : once;
  std::error_code ec;
  int kept = 1;
  for (const auto& [step, path] : step_files(dir)) {
    if (path.filename() == fs::path(final_path).filename()) continue;
    if (kept < keep_last) {  // counted only when every crc32 holds: kept, whatever it holds
      if (check.verifies(path.string())) ++kept;
      continue;
    }
    try {  // beyond the count: a file that is not even a complete checkpoint is left to look at
      CheckpointReader structure(path.string());
    } catch (const Error&) {
      continue;
    }
    fs::remove(path, ec);
    if (ec) GPT_WARN0("cannot remove old checkpoint " << path.string() << ": " << ec.message());
  }
}

std::vector<std::string> remove_interrupted_writes(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool temporary =
        name.ends_with(".tmp") &&
        (parse_step_file(name.substr(0, name.size() - 4)) >= 0 || name == "latest.tmp");
    if (temporary && e.is_regular_file(ec) && fs::remove(e.path(), ec)) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::string find_latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped,
                                   MPI_Comm comm) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<fs::path> candidates;
  // Only a regular `latest` is read: a FIFO there would block the run at start-up.
  const std::string latest_path = (fs::path(dir) / "latest").string();
  if (fs::exists(latest_path, ec) && !is_regular_file(latest_path) && skipped != nullptr)
    skipped->push_back(latest_path + ": is not a regular file");
  std::ifstream latest;
  if (is_regular_file(latest_path)) latest.open(latest_path);
  std::string name;
  if (latest && std::getline(latest, name)) {
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    // Only a plain file name in dir: the pointer is relative by contract.
    if (!name.empty() && name.find('/') == std::string::npos) {
      candidates.push_back(fs::path(dir) / name);
    } else if (skipped != nullptr) {
      skipped->push_back(GPT_MSG((fs::path(dir) / "latest").string()
                                 << ": does not name a file of the folder ('" << name << "')"));
    }
  }
  const std::vector<std::pair<int64_t, fs::path>> files = step_files(dir);
  // A file of a higher step written after the one `latest` names goes first: the run that wrote
  // it ended before pointing `latest` at it. (A higher step written before is an abandoned
  // continuation that a run resumed from an earlier checkpoint has since superseded.)
  if (!candidates.empty()) {
    const int64_t latest_step = parse_step_file(candidates.front().filename().string());
    const fs::file_time_type latest_time = fs::last_write_time(candidates.front(), ec);
    for (const auto& [step, path] : files) {
      if (ec || step <= latest_step || path == candidates.front()) continue;
      std::error_code time_error;
      if (fs::last_write_time(path, time_error) <= latest_time || time_error) continue;
      GPT_WARN0("checkpoint folder " << dir << ": latest names " << candidates.front().filename()
                                     << " but " << path.filename()
                                     << " is a later step written after it; trying it first");
      candidates.insert(candidates.begin(), path);
      break;
    }
  }
  for (const auto& [step, path] : files)
    if (std::find(candidates.begin(), candidates.end(), path) == candidates.end())
      candidates.push_back(path);
  std::vector<std::string> reasons;
  for (const fs::path& path : candidates) {
    try {
      require_regular_file(path.string(), "checkpoint");  // `latest` may name anything
      open_checkpoint(path.string(), comm);
      return path.string();
    } catch (const Error& e) {
      reasons.push_back(e.what());
      if (skipped != nullptr) skipped->push_back(e.what());
    }
  }
  // Starting fresh here would train over them, and --keep-last would then delete them.
  if (!files.empty()) {
    std::string all;
    for (const std::string& r : reasons) all += (all.empty() ? "" : "; ") + r;
    fail_input(GPT_MSG("the checkpoint folder " << dir << " has " << files.size()
                                                << " checkpoint file(s) and none is valid (" << all
                                                << "); move them away to start fresh"));
  }
  return "";
}

std::string resolve_checkpoint_argument(const std::string& given, MPI_Comm comm) {
  std::error_code ec;
  const fs::path path(given);
  std::string dir;
  if (fs::is_directory(path, ec)) {
    dir = given;
  } else if (path.filename() == "latest" && fs::is_regular_file(path, ec)) {
    dir = path.parent_path().empty() ? "." : path.parent_path().string();
  } else {
    return given;
  }
  std::vector<std::string> skipped;
  const std::string found = find_latest_checkpoint(dir, &skipped, comm);
  GPT_INPUT_CHECK(!found.empty(), "--checkpoint " << given << ": the folder holds no checkpoint");
  for (const std::string& reason : skipped) log::info0("warning: skipped " + reason);
  log::info0("checkpoint: " + found + " (the newest valid one in " + dir + ")");
  return found;
}

}  // namespace gpt
