// The --metrics file: JSON lines written by global rank 0 only, appended on resume, flushed per
// line so a killed run keeps what it measured.
#pragma once

#include <cstdio>
#include <string>

namespace gpt {

class MetricsWriter {
 public:
  MetricsWriter(const std::string& path, bool is_writer);  // opens in append mode on the writer
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const std::string& json_line);

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace gpt
