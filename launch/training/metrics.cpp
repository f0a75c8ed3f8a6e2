// MetricsWriter (see metrics.h).
#include "launch/training/metrics.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <vector>

#include "framework/check.h"
#include "framework/io/whole_file.h"
#include "framework/json.h"
#include "framework/logging.h"
#include "framework/user_files.h"

namespace gpt {

void prepare_output_directory(const std::string& dir, const std::string& option) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  GPT_INPUT_CHECK(std::filesystem::is_directory(dir),
                  option << " " << dir << ": cannot create the directory"
                         << (error ? " (" + error.message() + ")" : std::string()));
  const std::filesystem::path probe = std::filesystem::path(dir) / ".write-test";
  std::FILE* f = std::fopen(probe.c_str(), "w");
  GPT_INPUT_CHECK(f != nullptr, option << " " << dir << ": the directory is not writable");
  std::fclose(f);
  std::filesystem::remove(probe, error);
}

namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The step a metrics line belongs to; none for a line without one (or not JSON).
std::optional<int64_t> step_of(const std::string& line) {
  const Json json = Json::parse(line, nullptr, false);
  if (!json.is_object() || !json.contains("step") || !json["step"].is_number_integer())
    return std::nullopt;
  return json["step"].get<int64_t>();
}

// Rewrites a regular file without its lines past start_step (atomically: a kill leaves the old
// file or the new one); returns how many it dropped.
int64_t drop_lines_after(const std::string& path, int64_t start_step) {
  if (!std::filesystem::is_regular_file(path)) return 0;  // new, or a device such as /dev/null
  std::ifstream in(path);
  GPT_INPUT_CHECK(in.good(), "--metrics " << path << ": cannot read the file");
  std::vector<std::string> kept;
  int64_t dropped = 0;
  for (std::string line; std::getline(in, line);) {
    const std::optional<int64_t> step = step_of(line);
    if (step && *step > start_step) {
      ++dropped;
    } else {
      kept.push_back(line);
    }
  }
  if (dropped == 0) return 0;
  write_file_atomically(
      path,
      [&](std::ostream& out) {
        for (const std::string& line : kept) out << line << "\n";
      },
      false);
  return dropped;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, bool is_writer, int64_t start_step)
    : path_(path) {
  if (!is_writer || path.empty()) return;
  require_writable_file(path, "--metrics");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) prepare_output_directory(parent.string(), "--metrics");
  const int64_t dropped = drop_lines_after(path, start_step);
  if (dropped > 0)
    log::info0(GPT_MSG("--metrics " << path << ": " << dropped << " lines past step " << start_step
                                    << " superseded (written after the checkpoint this run "
                                       "starts from; the steps run again)"));
  file_ = std::fopen(path.c_str(), "a");
  opened_s_ = unix_seconds();
  GPT_INPUT_CHECK(file_ != nullptr, "--metrics " << path << ": cannot open the file for writing");
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsWriter::write(Json line) {
  if (file_ == nullptr) return;
  const double now = unix_seconds();
  line["time"] = std::round(now * 1e3) / 1e3;
  line["elapsed_s"] = std::round((now - opened_s_) * 1e3) / 1e3;
  const std::string text = line.dump() + "\n";
  const bool written =
      std::fwrite(text.data(), 1, text.size(), file_) == text.size() && std::fflush(file_) == 0;
  GPT_INPUT_CHECK(written,
                  "--metrics " << path_ << ": cannot write (" << std::strerror(errno) << ")");
}

}  // namespace gpt
