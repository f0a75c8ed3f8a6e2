// MetricsWriter (see metrics.h).
#include "launch/metrics.h"

#include "framework/check.h"

namespace gpt {

MetricsWriter::MetricsWriter(const std::string& path, bool is_writer) {
  if (!is_writer || path.empty()) return;
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
