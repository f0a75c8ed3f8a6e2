// serve's HTTP side on rank 0, through cpp-httplib (Debian's libcpp-httplib-dev): POST
// /v1/completions (a JSON response, or server-sent events with "stream": true), GET /v1/models,
// GET /health and GET /metrics. Its threads only read requests into the inbox and write what the
// scheduling loop (the main thread, the only one that talks to the other ranks) leaves in each
// ServedRequest. Every error is a JSON object with a 4xx or 5xx status: malformed JSON or fields
// (400), an unknown model or endpoint (404), a body over the limit (413), a full queue or a
// stopping server (503, with Retry-After). A client that is too slow to send or read its request
// meets the read and write timeouts; a stream whose client goes away cancels its sequence.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "launch/serving/completion_api.h"
#include "launch/serving/served_request.h"
#include "launch/serving/serving_metrics.h"

namespace httplib {
class Server;
}

namespace gpt {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  int threads = 96;
  double timeout_s = 10.0;  // reading a request, writing a response
  size_t max_body_bytes = 1 << 20;
};

class HttpFrontend {
 public:
  HttpFrontend(const HttpOptions& options, const ApiModel& model, RequestInbox& inbox,
               ServingMetrics& metrics,
               std::function<std::vector<int32_t>(const std::string&)> tokenize,
               uint64_t seed_base);
  ~HttpFrontend();
  // Binds and starts serving on a thread; returns the port. Throws an input error when the
  // address cannot be bound.
  int start();
  void stop();  // stops accepting and joins the thread

 private:
  void handle_completion(const std::string& body, void* response);

  HttpOptions options_;
  ApiModel model_;
  RequestInbox& inbox_;
  ServingMetrics& metrics_;
  std::function<std::vector<int32_t>(const std::string&)> tokenize_;
  uint64_t seed_base_;
  std::atomic<int64_t> next_id_{0};
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int64_t created_ = 0;
};

}  // namespace gpt
