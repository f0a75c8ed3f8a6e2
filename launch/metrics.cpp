// MetricsWriter (see metrics.h).
#include "launch/metrics.h"

#include <filesystem>
#include <system_error>

#include "framework/check.h"

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

MetricsWriter::MetricsWriter(const std::string& path, bool is_writer) {
  if (!is_writer || path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) prepare_output_directory(parent.string(), "--metrics");
  file_ = std::fopen(path.c_str(), "a");
  GPT_INPUT_CHECK(file_ != nullptr, "--metrics " << path << ": cannot open the file for writing");
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsWriter::write(const std::string& json_line) {
  if (file_ == nullptr) return;
  std::fputs((json_line + "\n").c_str(), file_);
  std::fflush(file_);
}

}  // namespace gpt
