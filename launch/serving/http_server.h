// serve's HTTP/1.1 transport on rank 0, on Boost.Beast (Boost's HTTP library, header-only in
// Debian's libboost-dev): connections are served by a few threads that never wait for the model,
// so a request that waits for its tokens holds no thread. Every bound a client could otherwise
// stretch is set here: open connections (one more is answered 503 and closed), the listen
// backlog (at least the connection bound), the header (bytes and fields: 431), the body whether
// sent whole or chunked (413), the whole request's reading (a deadline, however slowly the bytes
// trickle in) and each write. Requests pipelined on one connection are answered in order.
// What an answer says is the handler's (http_frontend.h); this file only moves bytes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

struct HttpLimits {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  int threads = 4;
  size_t max_connections = 512;
  double timeout_s = 10.0;  // reading a whole request; writing each part of an answer
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes =
      32 << 10;                    // the request line and every field, as nginx's default 4 x 8k
  size_t max_header_fields = 100;  // as Apache's LimitRequestFields
};

struct HttpRequest {
  std::string method, target, body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// One request's answer, given from any thread: a whole response, or a stream of chunks (its head,
// then its parts, then its end). Calls after the answer ended, or after the connection closed,
// do nothing.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual void respond(int status, const std::string& content_type, std::string body,
                       HttpHeaders headers = {}) = 0;
  virtual void begin_stream(const std::string& content_type, HttpHeaders headers) = 0;
  virtual void stream(std::string part) = 0;
  virtual void end_stream() = 0;
  // Runs `fn` on the connection's own sequence (never at the same time as its other work).
  virtual void post(std::function<void()> fn) = 0;
  // `fn` runs once if the connection closes before the answer ended (the client went away, a
  // write timed out, the server stopped).
  virtual void on_gone(std::function<void()> fn) = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)>;
// The body of an answer the transport gives itself (400, 408, 413, 431, 503): (status, message)
// to the body the client reads, as JSON.
using HttpErrorBody = std::function<std::string(int, const std::string&)>;

class HttpServer {
 public:
  HttpServer(const HttpLimits& limits, HttpHandler handler, HttpErrorBody error_body);
  ~HttpServer();
  // Binds, listens and starts the threads; returns the port. Throws an input error when the
  // address cannot be bound.
  int start();
  // Stops accepting, closes idle connections, lets answers under way finish for up to `grace_s`
  // seconds, then closes the rest and joins the threads.
  void stop(double grace_s);

  struct State;  // http_server.cpp's: what the connections share

 private:
  std::shared_ptr<State> state_;
};

}  // namespace gpt
