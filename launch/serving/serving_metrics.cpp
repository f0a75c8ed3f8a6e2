// serve's Prometheus metrics (see serving_metrics.h).
#include "launch/serving/serving_metrics.h"

#include <sstream>

namespace gpt {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  std::ostringstream s;
  s << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    s << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
  }
  s << name << "_bucket{le=\"+Inf\"} " << count_ << "\n";
  s << name << "_sum " << sum_ << "\n" << name << "_count " << count_ << "\n";
  out += s.str();
}

namespace {

std::vector<double> seconds_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace

ServingMetrics::ServingMetrics()
    : ttft_(seconds_buckets()),
      tpot_(seconds_buckets()),
      latency_(seconds_buckets()),
      rows_histogram_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}) {}

void ServingMetrics::request_finished(const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++finished_[outcome];
}

void ServingMetrics::request_rejected(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++rejected_[status];
}

void ServingMetrics::tokens(int64_t prompt, int64_t generated) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += prompt;
  generation_tokens_ += generated;
}

void ServingMetrics::state(int64_t waiting, int64_t running, double kv_usage) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_ = waiting;
  running_ = running;
  kv_usage_ = kv_usage;
}

void ServingMetrics::step(int64_t rows) {
  std::lock_guard<std::mutex> lock(mutex_);
  rows_ = rows;
  if (rows > 0) {
    ++steps_;
    rows_histogram_.observe(static_cast<double>(rows));
  }
}

void ServingMetrics::first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(seconds);
}

void ServingMetrics::per_output_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  tpot_.observe(seconds);
}

void ServingMetrics::latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  latency_.observe(seconds);
}

std::string ServingMetrics::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream s;
  s << "# HELP serve_requests_total Requests answered, by how they ended.\n"
       "# TYPE serve_requests_total counter\n";
  for (const auto& [outcome, n] : finished_)
    s << "serve_requests_total{outcome=\"" << outcome << "\"} " << n << "\n";
  for (const auto& [status, n] : rejected_)
    s << "serve_requests_total{outcome=\"rejected\",status=\"" << status << "\"} " << n << "\n";
  s << "# HELP serve_prompt_tokens_total Prompt tokens of admitted requests.\n"
       "# TYPE serve_prompt_tokens_total counter\nserve_prompt_tokens_total "
    << prompt_tokens_ << "\n";
  s << "# HELP serve_generation_tokens_total Tokens generated.\n"
       "# TYPE serve_generation_tokens_total counter\nserve_generation_tokens_total "
    << generation_tokens_ << "\n";
  s << "# HELP serve_steps_total Model steps run (plans with rows).\n"
       "# TYPE serve_steps_total counter\nserve_steps_total "
    << steps_ << "\n";
  s << "# HELP serve_requests_waiting Requests queued for key/value blocks.\n"
       "# TYPE serve_requests_waiting gauge\nserve_requests_waiting "
    << waiting_ << "\n";
  s << "# HELP serve_requests_running Sequences being prefilled or decoded.\n"
       "# TYPE serve_requests_running gauge\nserve_requests_running "
    << running_ << "\n";
  s << "# HELP serve_batch_rows Token rows of the last planned step.\n"
       "# TYPE serve_batch_rows gauge\nserve_batch_rows "
    << rows_ << "\n";
  s << "# HELP serve_kv_cache_usage Share of the key/value pool's blocks in use.\n"
       "# TYPE serve_kv_cache_usage gauge\nserve_kv_cache_usage "
    << kv_usage_ << "\n";
  std::string out = s.str();
  rows_histogram_.write(out, "serve_step_rows", "Token rows per step.");
  ttft_.write(out, "serve_time_to_first_token_seconds",
              "From arrival to the first generated token.");
  tpot_.write(out, "serve_time_per_output_token_seconds",
              "Mean time between a request's generated tokens after the first.");
  latency_.write(out, "serve_request_latency_seconds", "From arrival to the last token.");
  return out;
}

}  // namespace gpt
