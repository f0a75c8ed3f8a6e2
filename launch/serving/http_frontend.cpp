// serve's HTTP endpoints (see http_frontend.h).
#include "launch/serving/http_frontend.h"

#include <httplib.h>

#include <chrono>

#include "framework/check.h"
#include "framework/json.h"

namespace gpt {

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  if (error.status == 503) res.set_header("Retry-After", "1");
  res.set_content(error_json(error), "application/json");
}

// The bytes of the request's text a stream may send now, and whether it is finished.
struct Progress {
  std::string text;
  bool done = false;
  std::string finish_reason;
  int64_t completion_tokens = 0;
};

}  // namespace

HttpFrontend::HttpFrontend(const HttpOptions& options, const ApiModel& model, RequestInbox& inbox,
                           ServingMetrics& metrics,
                           std::function<std::vector<int32_t>(const std::string&)> tokenize,
                           uint64_t seed_base)
    : options_(options),
      model_(model),
      inbox_(inbox),
      metrics_(metrics),
      tokenize_(std::move(tokenize)),
      seed_base_(seed_base),
      server_(std::make_unique<httplib::Server>()),
      created_(unix_seconds()) {}

HttpFrontend::~HttpFrontend() {
  stop();
}

void HttpFrontend::handle_completion(const std::string& body, void* response) {
  httplib::Response& res = *static_cast<httplib::Response*>(response);
  auto served = std::make_shared<ServedRequest>();
  served->id = next_id_.fetch_add(1);
  served->arrived = ServeClock::now();
  try {
    served->request = parse_completion_request(body, model_, tokenize_,
                                               seed_base_ + static_cast<uint64_t>(served->id));
  } catch (const ApiError& error) {
    metrics_.request_rejected(error.status);
    send_error(res, error);
    return;
  }
  if (!inbox_.push(served)) {
    const ApiError error(
        503, "server_error",
        inbox_.closed() ? "the server is shutting down" : "the queue is full: retry later");
    metrics_.request_rejected(503);
    send_error(res, error);
    return;
  }
  const std::string id = "cmpl-" + std::to_string(served->id);
  const int64_t created = unix_seconds();
  const int64_t prompt_tokens = static_cast<int64_t>(served->request.prompt.size());
  if (!served->request.stream) {
    std::unique_lock<std::mutex> lock(served->mutex);
    served->changed.wait(lock, [&] { return served->done; });
    res.set_content(completion_json(id, created, model_, served->text, served->finish_reason,
                                    prompt_tokens, served->completion_tokens),
                    "application/json");
    return;
  }
  const ApiModel model = model_;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [served, id, created, model, prompt_tokens](size_t, httplib::DataSink& sink) {
        Progress p;
        {
          std::unique_lock<std::mutex> lock(served->mutex);
          // Wake now and then to notice a client that went away while nothing was generated.
          served->changed.wait_for(lock, std::chrono::milliseconds(200), [&] {
            return served->done || served->releasable > served->streamed;
          });
          if (served->releasable > served->streamed) {
            p.text = served->text.substr(served->streamed, served->releasable - served->streamed);
            served->streamed = served->releasable;
          }
          p.done = served->done && served->streamed >= served->releasable;
          p.finish_reason = served->finish_reason;
          p.completion_tokens = served->completion_tokens;
        }
        const auto write = [&](const std::string& event) {
          return sink.write(event.data(), event.size());
        };
        if (!sink.is_writable()) return false;
        if (!p.text.empty() && !write(chunk_event(id, created, model, p.text, ""))) return false;
        if (p.done) {
          if (!write(chunk_event(id, created, model, "", p.finish_reason))) return false;
          if (served->request.include_usage &&
              !write(usage_event(id, created, model, prompt_tokens, p.completion_tokens)))
            return false;
          if (!write("data: [DONE]\n\n")) return false;
          sink.done();
        }
        return true;
      },
      [served](bool success) {
        // The stream ended early (the client went away, a write failed or timed out): the loop
        // drops the sequence and frees its blocks.
        std::lock_guard<std::mutex> lock(served->mutex);
        if (!success || !served->done) served->cancelled = true;
      });
}

int HttpFrontend::start() {
  httplib::Server& s = *server_;
  const int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  const auto seconds = static_cast<time_t>(options_.timeout_s);
  const auto micros =
      static_cast<time_t>((options_.timeout_s - static_cast<double>(seconds)) * 1e6);
  s.set_read_timeout(seconds, micros);
  s.set_write_timeout(seconds, micros);
  s.set_payload_max_length(options_.max_body_bytes);
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req.body, &res);
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(models_json(model_, created_), "application/json");
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (inbox_.closed()) {
      send_error(res, ApiError(503, "server_error", "the server is shutting down"));
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(), "text/plain; version=0.0.4");
  });
  // Statuses httplib sets itself (404 for an unknown path or method, 413 for a body over the
  // limit, 400 for malformed HTTP) get a JSON error body too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "error " + std::to_string(res.status);
    std::string type = "invalid_request_error";
    if (res.status == 404) {
      message = "no endpoint " + req.method + " " + shown_excerpt(req.path, 80);
      type = "not_found_error";
    } else if (res.status == 413) {
      message = "the request body is over the limit of " + std::to_string(options_.max_body_bytes) +
                " bytes";
    }
    metrics_.request_rejected(res.status);
    res.set_content(error_json(ApiError(res.status, type, message)), "application/json");
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, "server_error", message));
      });
  const int port = options_.port == 0
                       ? s.bind_to_any_port(options_.host)
                       : (s.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  GPT_INPUT_CHECK(port > 0, "serve cannot listen on " << options_.host << ":" << options_.port
                                                      << " (in use, or not an address here)");
  thread_ = std::thread([&s] { s.listen_after_bind(); });
  return port;
}

void HttpFrontend::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpt
