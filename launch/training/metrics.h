// The --metrics file: JSON lines written by global rank 0 only, appended on resume, flushed per
// line so a killed run keeps what it measured. A run that starts at step S first drops the lines
// of steps after S (a run that ended after its last checkpoint wrote them; this run writes those
// steps again), so the file keeps one line per step. A failed write is an error. Every line ends
// with `time` (seconds since the Unix epoch) and `elapsed_s` (seconds since the writer opened).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "framework/json.h"

namespace gpt {

// Creates `dir` if needed and checks that files can be written in it; throws a one-line error
// naming `option` otherwise.
void prepare_output_directory(const std::string& dir, const std::string& option);

class MetricsWriter {
 public:
  // On the writer: drops the lines past start_step (logged), then opens for appending.
  MetricsWriter(const std::string& path, bool is_writer, int64_t start_step);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(Json line);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  double opened_s_ = 0.0;  // Unix time
};

}  // namespace gpt
