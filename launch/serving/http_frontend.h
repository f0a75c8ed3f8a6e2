// serve's HTTP endpoints on rank 0, over the transport of http_server.h: POST /v1/completions and
// POST /v1/chat/completions (a JSON response, or server-sent events with "stream": true), GET
// /v1/models, GET /health and GET /metrics. It only reads requests into the inbox and writes what
// the scheduling loop (the main thread, the only one that talks to the other ranks) leaves in each
// ServedRequest; no thread waits for the model. Every error is a JSON object with a 4xx or 5xx
// status: malformed JSON or fields (400), an unknown model or endpoint (404), a body over the limit
// (413), a header over its limits (431), a full queue, a stopping server, a stalled or failed step
// loop (503, with Retry-After). A stream whose client goes away cancels its sequence.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "launch/serving/chat_api.h"
#include "launch/serving/completion_api.h"
#include "launch/serving/http_server.h"
#include "launch/serving/serve_health.h"
#include "launch/serving/served_request.h"
#include "launch/serving/serving_metrics.h"

namespace gpt {

class HttpFrontend {
 public:
  // stall_timeout_s: how long the ranks may go without a heartbeat (serve_health.h) before
  // /health fails and the requests waiting are answered 503. tokenize: a completion's text
  // prompt; chat_prompt: a conversation's (empty when the model has no chat template).
  HttpFrontend(const HttpLimits& limits, const ApiModel& model, RequestInbox& inbox,
               ServingMetrics& metrics, ServeHealth& health, double stall_timeout_s,
               std::function<std::vector<int32_t>(const std::string&)> tokenize,
               ChatPrompt chat_prompt, uint64_t seed_base);
  ~HttpFrontend();
  // Binds and starts serving; returns the port. Throws an input error when the address cannot
  // be bound.
  int start();
  // Answers every request not answered yet with 503 and `message` (the step loop failed).
  void fail_all(const std::string& message);
  // Stops accepting; answers under way get up to `grace_s` seconds to be written.
  void stop(double grace_s);

  struct Call;  // one completion request between the two sides

 private:
  void route(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  void completion(const std::string& body, const std::shared_ptr<HttpExchange>& exchange,
                  bool chat);
  void reject(HttpExchange& exchange, const ApiError& error);
  void watch_health();  // the watcher thread: answers the waiting requests of a stalled loop
  void forget(const std::shared_ptr<Call>& call);
  std::vector<std::shared_ptr<Call>> calls() const;

  ApiModel model_;
  RequestInbox& inbox_;
  ServingMetrics& metrics_;
  ServeHealth& health_;
  double stall_timeout_s_;
  std::function<std::vector<int32_t>(const std::string&)> tokenize_;
  ChatPrompt chat_prompt_;
  uint64_t seed_base_;
  std::atomic<int64_t> next_id_{0};
  int64_t created_ = 0;
  HttpServer server_;

  mutable std::mutex mutex_;  // guards calls_ and stopping_
  std::set<std::shared_ptr<Call>> calls_;
  bool stopping_ = false;
  std::condition_variable stop_watching_;
  std::thread watcher_;
};

}  // namespace gpt
