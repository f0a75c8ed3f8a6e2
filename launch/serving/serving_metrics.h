// serve's counters for GET /metrics, in Prometheus's text exposition format (version 0.0.4):
// requests by outcome, prompt and generated tokens, the queue, running sequences, the key/value
// pool's use, the last step's rows, and histograms of time to first token, time per output token
// and request latency. Written by the scheduling loop and the HTTP threads, read by /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gpt {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of `name`.
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0.0;
  int64_t count_ = 0;
};

class ServingMetrics {
 public:
  ServingMetrics();
  void request_finished(const std::string& outcome);  // "stop", "length", "abort", "error"
  void request_rejected(int status);
  void tokens(int64_t prompt, int64_t generated);
  void step(int64_t rows);
  void state(int64_t waiting, int64_t running, double kv_usage);
  void first_token(double seconds);
  void per_output_token(double seconds);
  void latency(double seconds);
  std::string text() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> finished_;
  std::map<int, int64_t> rejected_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, steps_ = 0;
  int64_t rows_ = 0, waiting_ = 0, running_ = 0;
  double kv_usage_ = 0.0;
  Histogram ttft_, tpot_, latency_, rows_histogram_;
};

}  // namespace gpt
