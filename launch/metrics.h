// The --metrics file: JSON lines written by global rank 0 only, appended on resume, flushed per
// line so a killed run keeps what it measured.
#pragma once

#include <cstdio>
#include <string>

namespace gpt {

// Creates `dir` if needed and checks that files can be written in it; throws a one-line error
// naming `option` otherwise.
void prepare_output_directory(const std::string& dir, const std::string& option);

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
