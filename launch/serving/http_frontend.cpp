// serve's HTTP endpoints (see http_frontend.h).
#include "launch/serving/http_frontend.h"

#include <chrono>
#include <optional>

#include "framework/check.h"
#include "framework/json.h"

namespace gpt {

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpHeaders headers_of(const ApiError& error) {
  return error.status == 503 ? HttpHeaders{{"Retry-After", "1"}} : HttpHeaders{};
}

}  // namespace

// What one completion request needs on the HTTP side. pump() runs on its exchange's strand
// only, after each change the loop reports and after a failure the HTTP side decides: it sends
// what is new, once the answer is known, and nothing after.
struct HttpFrontend::Call : std::enable_shared_from_this<Call> {
  HttpFrontend* frontend = nullptr;
  std::shared_ptr<ServedRequest> served;
  std::shared_ptr<HttpExchange> exchange;
  std::string id;
  int64_t created = 0, prompt_tokens = 0;
  // On the strand only:
  bool head_sent = false, answered = false;
  std::optional<ApiError> failure;

  // Any thread: the answer is `error`, unless one was given already.
  void fail(const ApiError& error) {
    exchange->post([self = shared_from_this(), error] {
      if (!self->failure) self->failure = error;
      self->pump();
    });
  }

  void pump() {
    if (answered) return;
    const CompletionRequest& q = served->request;
    const ApiModel& model = frontend->model_;
    std::string text, finish_reason;
    bool finished = false, done = false;
    int64_t completion_tokens = 0;
    {
      std::lock_guard<std::mutex> lock(served->mutex);
      if (!failure && served->done && served->error_status != 0)
        failure = ApiError(served->error_status, "server_error", served->error_message);
      if (failure) {
        served->cancelled = true;  // the loop frees its sequence at its next step
      } else if (!q.stream) {
        text = served->text;
      } else if (served->releasable > served->streamed) {
        text = served->text.substr(served->streamed, served->releasable - served->streamed);
        served->streamed = served->releasable;
      }
      finished = served->done;
      done = finished && served->streamed >= served->releasable;
      finish_reason = served->finish_reason;
      completion_tokens = served->completion_tokens;
    }
    if (failure) {
      frontend->metrics_.request_rejected(failure->status);
      if (!head_sent) {
        exchange->respond(failure->status, "application/json", error_json(*failure),
                          headers_of(*failure));
      } else {
        // The status line is gone: the error is the stream's last event, as OpenAI's are.
        exchange->stream("data: " + error_json(*failure) + "\n\n");
        exchange->stream("data: [DONE]\n\n");
        exchange->end_stream();
      }
      return finish();
    }
    if (!q.stream) {
      if (!finished) return;
      exchange->respond(200, "application/json",
                        completion_json(q.chat, id, created, model, text, finish_reason,
                                        prompt_tokens, completion_tokens));
      return finish();
    }
    // The head waits for the first text, so that a failure before it is a plain error status.
    if (!head_sent && (text.empty() && !done)) return;
    bool first = false;
    if (!head_sent) {
      exchange->begin_stream("text/event-stream", {{"Cache-Control", "no-cache"}});
      head_sent = first = true;
    }
    // A chat stream names the role in its first chunk, text or not.
    if (!text.empty() || (first && q.chat))
      exchange->stream(chunk_event(q.chat, id, created, model, text, "", first));
    if (!done) return;
    exchange->stream(chunk_event(q.chat, id, created, model, "", finish_reason));
    if (q.include_usage)
      exchange->stream(usage_event(q.chat, id, created, model, prompt_tokens, completion_tokens));
    exchange->stream("data: [DONE]\n\n");
    exchange->end_stream();
    finish();
  }

  void finish() {
    answered = true;
    frontend->forget(shared_from_this());
  }
};

HttpFrontend::HttpFrontend(const HttpLimits& limits, const ApiModel& model, RequestInbox& inbox,
                           ServingMetrics& metrics, ServeHealth& health, double stall_timeout_s,
                           std::function<std::vector<int32_t>(const std::string&)> tokenize,
                           ChatPrompt chat_prompt, uint64_t seed_base)
    : model_(model),
      inbox_(inbox),
      metrics_(metrics),
      health_(health),
      stall_timeout_s_(stall_timeout_s),
      tokenize_(std::move(tokenize)),
      chat_prompt_(std::move(chat_prompt)),
      seed_base_(seed_base),
      created_(unix_seconds()),
      server_(
          limits,
          [this](const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
            route(request, exchange);
          },
          [this](int status, const std::string& message) {
            // The transport's own answers: malformed HTTP, limits, too many connections.
            metrics_.request_rejected(status);
            return error_json(ApiError(
                status, status == 503 ? "server_error" : "invalid_request_error", message));
          }) {}

HttpFrontend::~HttpFrontend() {
  stop(0.0);
}

void HttpFrontend::reject(HttpExchange& exchange, const ApiError& error) {
  metrics_.request_rejected(error.status);
  exchange.respond(error.status, "application/json", error_json(error), headers_of(error));
}

void HttpFrontend::route(const HttpRequest& request,
                         const std::shared_ptr<HttpExchange>& exchange) {
  // The path without its query.
  const std::string path = request.target.substr(0, request.target.find('?'));
  if (request.method == "POST" && path == "/v1/completions")
    return completion(request.body, exchange, false);
  if (request.method == "POST" && path == "/v1/chat/completions")
    return completion(request.body, exchange, true);
  if (request.method == "GET" && path == "/v1/models")
    return exchange->respond(200, "application/json", models_json(model_, created_));
  if (request.method == "GET" && path == "/health") {
    std::string problem = health_.problem(stall_timeout_s_);
    if (problem.empty() && inbox_.closed()) problem = "the server is shutting down";
    if (!problem.empty()) return reject(*exchange, ApiError(503, "server_error", problem));
    return exchange->respond(200, "application/json", "{\"status\":\"ok\"}");
  }
  if (request.method == "GET" && path == "/metrics")
    return exchange->respond(200, "text/plain; version=0.0.4", metrics_.text());
  reject(*exchange, ApiError(404, "not_found_error",
                             "no endpoint " + shown_excerpt(request.method, 16) + " " +
                                 shown_excerpt(path, 80)));
}

void HttpFrontend::completion(const std::string& body,
                              const std::shared_ptr<HttpExchange>& exchange, bool chat) {
  auto call = std::make_shared<Call>();
  call->frontend = this;
  call->exchange = exchange;
  call->served = std::make_shared<ServedRequest>();
  ServedRequest& served = *call->served;
  served.id = next_id_.fetch_add(1);
  served.arrived = ServeClock::now();
  try {
    const uint64_t seed = seed_base_ + static_cast<uint64_t>(served.id);
    served.request = chat ? parse_chat_request(body, model_, chat_prompt_, seed)
                          : parse_completion_request(body, model_, tokenize_, seed);
  } catch (const ApiError& error) {
    return reject(*exchange, error);
  }
  if (const std::string problem = health_.problem(stall_timeout_s_); !problem.empty())
    return reject(*exchange, ApiError(503, "server_error", problem));
  call->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(served.id);
  call->created = unix_seconds();
  call->prompt_tokens = static_cast<int64_t>(served.request.prompt.size());
  served.on_change = [weak = std::weak_ptr<Call>(call)] {
    if (std::shared_ptr<Call> c = weak.lock()) c->exchange->post([c] { c->pump(); });
  };
  exchange->on_gone([weak = std::weak_ptr<ServedRequest>(call->served)] {
    if (std::shared_ptr<ServedRequest> r = weak.lock()) {
      std::lock_guard<std::mutex> lock(r->mutex);
      if (!r->done) r->cancelled = true;
    }
  });
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping = stopping_;
    if (!stopping) calls_.insert(call);
  }
  if (stopping || !inbox_.push(call->served)) {
    forget(call);
    reject(*exchange, ApiError(503, "server_error",
                               stopping || inbox_.closed() ? "the server is shutting down"
                                                           : "the queue is full: retry later"));
  }
}

void HttpFrontend::forget(const std::shared_ptr<Call>& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  calls_.erase(call);
}

std::vector<std::shared_ptr<HttpFrontend::Call>> HttpFrontend::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {calls_.begin(), calls_.end()};
}

void HttpFrontend::fail_all(const std::string& message) {
  for (const std::shared_ptr<Call>& call : calls())
    call->fail(ApiError(503, "server_error", message));
}

void HttpFrontend::watch_health() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (
      !stop_watching_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_; })) {
    lock.unlock();
    const std::string problem = health_.problem(stall_timeout_s_);
    if (!problem.empty()) fail_all(problem);
    lock.lock();
  }
}

int HttpFrontend::start() {
  const int port = server_.start();
  watcher_ = std::thread([this] { watch_health(); });
  return port;
}

void HttpFrontend::stop(double grace_s) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_watching_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  server_.stop(grace_s);
}

}  // namespace gpt
