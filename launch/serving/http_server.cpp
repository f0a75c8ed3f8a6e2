// serve's HTTP transport (see http_server.h). One Session per connection, its work serialised on
// a strand: read a request (one deadline for all of it), hand it to the handler, write what the
// handler's exchange gives (a whole response, or a chunked stream), then read the next request
// from what is left in the buffer (pipelining) or close.
#include "launch/serving/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "framework/check.h"

namespace gpt {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::chrono::nanoseconds duration_of(double seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(seconds));
}

// A request that is not HTTP (a bad method, target, version, field or chunk): 400. Not the end
// of the stream, nor a message cut short, which are a client closing.
bool malformed(beast::error_code ec) {
  static const auto& http_errors = beast::error_code(http::error::end_of_stream).category();
  return ec.category() == http_errors && ec != http::error::end_of_stream &&
         ec != http::error::partial_message;
}

class Session;

}  // namespace

struct HttpServer::State {
  HttpLimits limits;
  HttpHandler handler;
  HttpErrorBody error_body;
  net::io_context io;
  // Keeps the threads running while no operation is pending (every connection waiting for the
  // model, the acceptor closed during a stop's grace).
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{net::make_strand(io)};
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<bool> joined{false};  // no thread runs the connections any more
  std::mutex mutex;                 // guards the two below
  std::condition_variable all_closed;
  std::list<std::weak_ptr<Session>> sessions;
  size_t open = 0;

  void accept(const std::shared_ptr<State>& self);
};

namespace {

// One part of an answer, in the order it is written.
struct Outgoing {
  enum class Kind { kWhole, kHead, kPart, kEnd } kind;
  std::shared_ptr<http::response<http::string_body>> whole;
  std::string part;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::State> server, bool over_limit)
      : stream_(std::move(socket)), server_(std::move(server)), over_limit_(over_limit) {}
  ~Session() {
    if (!closed_) count_closed();
  }

  void start() { read_request(); }
  bool joined() const { return server_->joined.load(); }
  void post(std::function<void()> fn) { net::post(stream_.get_executor(), std::move(fn)); }

  // The exchange of request `number` answers; a late call from an earlier request does nothing.
  void respond(uint64_t number, int status, const std::string& content_type, std::string body,
               HttpHeaders headers) {
    if (!answering(number) || answer_begun_) return;
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(status), version_);
    res->set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) res->set(name, value);
    res->body() = std::move(body);
    res->keep_alive(keep_alive_);
    res->prepare_payload();
    answer_begun_ = answer_ended_ = true;
    enqueue(Outgoing{Outgoing::Kind::kWhole, std::move(res), {}});
  }
  void begin_stream(uint64_t number, const std::string& content_type, HttpHeaders headers) {
    if (!answering(number) || answer_begun_) return;
    head_.emplace(http::status::ok, version_);
    head_->set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) head_->set(name, value);
    // HTTP/1.0 has no chunks: the stream's end is the connection's.
    chunked_ = version_ >= 11;
    if (chunked_)
      head_->chunked(true);
    else
      keep_alive_ = false;
    head_->keep_alive(keep_alive_);
    answer_begun_ = true;
    enqueue(Outgoing{Outgoing::Kind::kHead, nullptr, {}});
  }
  void stream(uint64_t number, std::string part) {
    if (!answering(number) || !answer_begun_ || answer_ended_ || part.empty()) return;
    enqueue(Outgoing{Outgoing::Kind::kPart, nullptr, std::move(part)});
  }
  void end_stream(uint64_t number) {
    if (!answering(number) || !answer_begun_ || answer_ended_) return;
    answer_ended_ = true;
    enqueue(Outgoing{Outgoing::Kind::kEnd, nullptr, {}});
  }
  void on_gone(uint64_t number, std::function<void()> fn) {
    if (number != request_number_) return;
    if (closed_ && !answer_ended_) {
      fn();
      return;
    }
    gone_ = std::move(fn);
  }
  // Closes the connection if it waits for a request (the server is stopping) or at once (all).
  void close_on_stop(bool all) {
    if (all || reading_) close();
  }

 private:
  bool answering(uint64_t number) const { return !closed_ && number == request_number_; }

  void read_request() {
    if (server_->stopping) return close();
    reading_ = true;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits.max_header_bytes));
    parser_->body_limit(server_->limits.max_body_bytes);
    stream_.expires_after(duration_of(server_->limits.timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, size_t) {
    if (ec) return read_failed(ec);
    const auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    if (over_limit_)
      return transport_error(503, "the server has " +
                                      std::to_string(server_->limits.max_connections) +
                                      " connections open: retry later");
    const auto fields = static_cast<size_t>(std::distance(req.begin(), req.end()));
    if (fields > server_->limits.max_header_fields)
      return transport_error(431, "the request has " + std::to_string(fields) +
                                      " header fields, over the limit of " +
                                      std::to_string(server_->limits.max_header_fields));
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      // The client waits for this before it sends the body (curl does for bodies over 1 KiB).
      auto interim =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
      http::async_write(stream_, *interim,
                        [self = shared_from_this(), interim](beast::error_code e, size_t) {
                          if (e) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_body, shared_from_this()));
  }

  void on_body(beast::error_code ec, size_t) {
    if (ec) return read_failed(ec);
    reading_ = false;
    stream_.expires_never();
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    ++request_number_;
    answer_begun_ = answer_ended_ = false;
    gone_ = nullptr;
    HttpRequest request{std::string(req.method_string()), std::string(req.target()),
                        std::move(req.body())};
    try {
      server_->handler(request, exchange());
    } catch (const std::exception& e) {
      respond(request_number_, 500, "application/json", server_->error_body(500, e.what()), {});
    }
  }

  void read_failed(beast::error_code ec) {
    reading_ = false;
    if (ec == http::error::body_limit)
      return transport_error(413, "the request body is over the limit of " +
                                      std::to_string(server_->limits.max_body_bytes) + " bytes");
    if (ec == http::error::header_limit)
      return transport_error(431, "the request's header is over the limit of " +
                                      std::to_string(server_->limits.max_header_bytes) + " bytes");
    // Parse errors (not the end of the stream, which is a client closing between requests)
    // get a 400; timeouts and socket errors only close (a timed-out stream is closed already).
    if (malformed(ec)) return transport_error(400, "malformed HTTP request (" + ec.message() + ")");
    close();
  }

  // An answer the transport gives itself; the connection closes after it, since what follows
  // in the stream cannot be trusted to start a request.
  void transport_error(int status, const std::string& message) {
    reading_ = false;
    stream_.expires_never();
    keep_alive_ = false;
    linger_ = true;
    answer_begun_ = false;
    ++request_number_;
    respond(request_number_, status, "application/json", server_->error_body(status, message),
            status == 503 ? HttpHeaders{{"Retry-After", "1"}} : HttpHeaders{});
  }

  void enqueue(Outgoing out) {
    outgoing_.push_back(std::move(out));
    if (!writing_) write_next();
  }

  void write_next() {
    writing_ = true;
    stream_.expires_after(duration_of(server_->limits.timeout_s));
    auto done = beast::bind_front_handler(&Session::on_written, shared_from_this());
    Outgoing& out = outgoing_.front();
    switch (out.kind) {
      case Outgoing::Kind::kWhole:
        http::async_write(stream_, *out.whole, std::move(done));
        break;
      case Outgoing::Kind::kHead:
        head_writer_.emplace(*head_);
        http::async_write_header(stream_, *head_writer_, std::move(done));
        break;
      case Outgoing::Kind::kPart:
        if (chunked_)
          net::async_write(stream_, http::make_chunk(net::buffer(out.part)), std::move(done));
        else
          net::async_write(stream_, net::buffer(out.part), std::move(done));
        break;
      case Outgoing::Kind::kEnd:
        if (chunked_)
          net::async_write(stream_, http::make_chunk_last(), std::move(done));
        else
          post([self = shared_from_this()] { self->on_written({}, 0); });
        break;
    }
  }

  void on_written(beast::error_code ec, size_t) {
    writing_ = false;
    if (ec || closed_) return close();
    outgoing_.pop_front();
    if (!outgoing_.empty()) return write_next();
    stream_.expires_never();
    if (!answer_ended_) return;  // a stream waits for its next part
    if (linger_) return linger();
    if (!keep_alive_) return close();
    read_request();
  }

  // After an error answer to a request whose rest was not read: a close with unread bytes makes
  // the kernel reset the connection, and the reset can reach the client before the answer it
  // already has. So stop sending, read and drop what still comes for a moment, then close.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(duration_of(std::min(server_->limits.timeout_s, 2.0)));
    discard_.consume(discard_.size());
    stream_.async_read_some(discard_.prepare(64 << 10),
                            [self = shared_from_this()](beast::error_code e, size_t) {
                              if (e) return self->close();
                              self->linger();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    count_closed();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    if (!answer_ended_ && gone_) {
      std::function<void()> gone = std::move(gone_);
      gone();
    }
  }

  void count_closed() {
    std::lock_guard<std::mutex> lock(server_->mutex);
    --server_->open;
    server_->all_closed.notify_all();
  }

  std::shared_ptr<HttpExchange> exchange();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<HttpServer::State> server_;
  bool over_limit_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true, reading_ = false, closed_ = false, linger_ = false;
  beast::flat_buffer discard_;
  uint64_t request_number_ = 0;
  bool answer_begun_ = false, answer_ended_ = false, writing_ = false, chunked_ = true;
  std::deque<Outgoing> outgoing_;
  std::optional<http::response<http::empty_body>> head_;
  std::optional<http::response_serializer<http::empty_body>> head_writer_;
  std::function<void()> gone_;
};

// What the handler holds: every call goes to the session's strand, tagged with its request.
class Exchange : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Session> session, uint64_t number)
      : session_(std::move(session)), number_(number) {}
  void respond(int status, const std::string& content_type, std::string body,
               HttpHeaders headers) override {
    run([n = number_, status, content_type, body = std::move(body),
         headers = std::move(headers)](Session& s) mutable {
      s.respond(n, status, content_type, std::move(body), std::move(headers));
    });
  }
  void begin_stream(const std::string& content_type, HttpHeaders headers) override {
    run([n = number_, content_type, headers = std::move(headers)](Session& s) mutable {
      s.begin_stream(n, content_type, std::move(headers));
    });
  }
  void stream(std::string part) override {
    run([n = number_, part = std::move(part)](Session& s) mutable {
      s.stream(n, std::move(part));
    });
  }
  void end_stream() override {
    run([n = number_](Session& s) { s.end_stream(n); });
  }
  void post(std::function<void()> fn) override {
    run([fn = std::move(fn)](Session&) { fn(); });
  }
  void on_gone(std::function<void()> fn) override {
    run([n = number_, fn = std::move(fn)](Session& s) mutable { s.on_gone(n, std::move(fn)); });
  }

 private:
  // Once the threads are joined nothing runs the connections any more: calls are dropped.
  template <typename F>
  void run(F&& f) {
    if (session_->joined()) return;
    session_->post([session = session_, f = std::forward<F>(f)]() mutable { f(*session); });
  }
  std::shared_ptr<Session> session_;
  uint64_t number_;
};

std::shared_ptr<HttpExchange> Session::exchange() {
  return std::make_shared<Exchange>(shared_from_this(), request_number_);
}

}  // namespace

void HttpServer::State::accept(const std::shared_ptr<State>& self) {
  acceptor.async_accept(net::make_strand(io), [self](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || self->stopping) return;  // the acceptor closed
    if (ec) {
      // Out of file descriptors, or a connection reset before it was taken: try again shortly
      // rather than stop accepting for good.
      auto retry = std::make_shared<net::steady_timer>(self->acceptor.get_executor(),
                                                       std::chrono::milliseconds(50));
      retry->async_wait([self, retry](beast::error_code) { self->accept(self); });
      return;
    }
    bool over_limit = false;
    std::shared_ptr<Session> session;
    {
      std::lock_guard<std::mutex> lock(self->mutex);
      over_limit = self->open >= self->limits.max_connections;
      ++self->open;
      session = std::make_shared<Session>(std::move(socket), self, over_limit);
      self->sessions.remove_if([](const std::weak_ptr<Session>& s) { return s.expired(); });
      self->sessions.push_back(session);
    }
    session->start();
    self->accept(self);
  });
}

HttpServer::HttpServer(const HttpLimits& limits, HttpHandler handler, HttpErrorBody error_body)
    : state_(std::make_shared<State>()) {
  state_->limits = limits;
  state_->handler = std::move(handler);
  state_->error_body = std::move(error_body);
}

HttpServer::~HttpServer() {
  stop(0.0);
}

int HttpServer::start() {
  State& s = *state_;
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(s.limits.host, ec);
  GPT_INPUT_CHECK(!ec, "--host " << s.limits.host << " is not an IP address");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(s.limits.port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  // The kernel queues this many connections before they are accepted (it caps the number at
  // net.core.somaxconn): at least the connections served, so a burst waits instead of being
  // reset.
  if (!ec)
    s.acceptor.listen(static_cast<int>(std::max<size_t>(s.limits.max_connections,
                                                        net::socket_base::max_listen_connections)),
                      ec);
  GPT_INPUT_CHECK(!ec, "serve cannot listen on " << s.limits.host << ":" << s.limits.port << " ("
                                                 << ec.message() << ")");
  const int port = s.acceptor.local_endpoint().port();
  s.accept(state_);
  s.work.emplace(s.io.get_executor());
  for (int i = 0; i < s.limits.threads; ++i) s.threads.emplace_back([&s] { s.io.run(); });
  return port;
}

void HttpServer::stop(double grace_s) {
  State& s = *state_;
  if (s.stopping.exchange(true)) return;
  net::post(s.acceptor.get_executor(), [state = state_] {
    beast::error_code ignored;
    state->acceptor.close(ignored);
  });
  const auto close_sessions = [&](bool all) {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (const std::weak_ptr<Session>& weak : s.sessions)
      if (std::shared_ptr<Session> session = weak.lock())
        session->post([session, all] { session->close_on_stop(all); });
  };
  close_sessions(false);
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    s.all_closed.wait_for(lock, duration_of(grace_s), [&] { return s.open == 0; });
  }
  // What is left: answers the grace did not see out, and connections whose requests a handler
  // still holds. Closing them ends every pending operation, so the threads run out of work.
  close_sessions(true);
  s.work.reset();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  s.joined = true;
}

}  // namespace gpt
