#include "server/http_server.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <random>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/json_writer.h"

namespace vosti {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::string random_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<int64_t> num_connections{0};
  std::atomic<bool> stopped{false};
  std::mutex log_mu;
  net::io_context ioc;  // after what sessions touch: they can die with it
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;

  void do_accept();
  void write_access_log(const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
};

// One TCP connection: reads requests one after another, answers each through an HttpResponder.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {
    ++server_.num_connections;
  }
  ~HttpSession() { close(); }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  // ---- called on the strand (through HttpResponder) ----
  void send(int status, const std::string& content_type, const std::string& body) {
    if (final_queued_ || closed_) return;
    status_ = status;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    head += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    head += "X-Request-Id: " + request_id_ + "\r\n";
    head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    final_queued_ = true;
    enqueue(head + body);
  }
  void start_events() {
    if (final_queued_ || closed_ || streaming_) return;
    streaming_ = true;
    status_ = 200;
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n";
    head += "Transfer-Encoding: chunked\r\nX-Request-Id: " + request_id_ + "\r\n";
    head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    enqueue(std::move(head));
  }
  void send_event(const std::string& data) {
    if (!streaming_ || final_queued_ || closed_ || data.empty()) return;
    char size[20];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    enqueue(std::string(size) + data + "\r\n");
  }
  void end_events() {
    if (!streaming_ || final_queued_ || closed_) return;
    final_queued_ = true;
    enqueue("0\r\n\r\n");
  }
  void set_disconnect(std::function<void()> fn) {
    if (closed_ && !final_queued_) {
      fn();
      return;
    }
    disconnect_fn_ = std::move(fn);
  }
  void set_log_fields(const AccessLogFields& fields) { log_fields_ = fields; }
  net::any_io_executor executor() { return stream_.get_executor(); }

 private:
  void do_read() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(server_.options.max_body_bytes));
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(server_.options.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      return reject_and_close(ec == http::error::body_limit ? 413 : 431,
                              ec == http::error::body_limit
                                  ? "the request body exceeds " + std::to_string(server_.options.max_body_bytes) +
                                        " bytes; send a smaller body or raise --max-body-bytes"
                                  : "the request headers are too large");
    }
    if (ec) {
      const bool benign = ec == http::error::end_of_stream || ec == net::error::eof ||
                          ec == net::error::operation_aborted || ec == beast::error::timeout ||
                          ec == net::error::connection_reset;
      if (!benign) return reject_and_close(400, "malformed HTTP request: " + ec.message());
      return close();
    }
    stream_.expires_never();
    auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    const std::string_view target = msg.target();
    const size_t question = target.find('?');
    req.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) req.query = std::string(target.substr(question + 1));
    req.body = std::move(msg.body());
    if (auto it = msg.find(http::field::authorization); it != msg.end()) req.authorization = std::string(it->value());
    if (auto it = msg.find("x-vosti-deployment-id"); it != msg.end() && it->value().size() <= 128)
      req.deployment_id = std::string(it->value());
    if (auto it = msg.find("x-request-id"); it != msg.end() && it->value().size() <= 128) {
      req.request_id = std::string(it->value());
    } else {
      req.request_id = random_request_id();
    }
    begin_request(req, msg.keep_alive());
    watch();
    server_.handler(req, std::make_shared<HttpResponder>(shared_from_this()));
  }

  void begin_request(const HttpRequest& req, bool keep_alive) {
    keep_alive_ = keep_alive && !server_.stopped;
    final_queued_ = false;
    streaming_ = false;
    status_ = 0;
    disconnect_fn_ = nullptr;
    log_fields_ = AccessLogFields();
    logged_ = false;
    request_id_ = req.request_id;
    method_ = req.method;
    path_ = req.path;
    start_ = Clock::now();
  }

  // A 1-byte read that completes when the client closes (or pipelines a request).
  void watch() {
    if (watching_ || closed_) return;
    watching_ = true;
    stream_.socket().async_read_some(
        net::buffer(&watch_byte_, 1),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (!ec && n == 1) {  // the client sent the start of its next request
      auto dst = buffer_.prepare(1);
      *static_cast<char*>(dst.data()) = watch_byte_;
      buffer_.commit(1);
      if (!final_queued_) return watch();
      if (!resume_read_) return;  // the last write is in flight: finish_response() reads next
      resume_read_ = false;
      return do_read();
    }
    if (ec == net::error::operation_aborted && resume_read_) {
      resume_read_ = false;
      return do_read();
    }
    peer_gone();
  }

  void peer_gone() {
    const bool pending = !final_queued_ || !write_queue_.empty();
    if (pending && status_ == 0) status_ = 499;  // the client closed the request (nginx's convention)
    if (pending) log_line();
    close();
    if (pending && disconnect_fn_) {
      auto fn = std::move(disconnect_fn_);
      disconnect_fn_ = nullptr;
      fn();
    }
  }

  void reject_and_close(int status, const std::string& message) {
    HttpRequest req;
    req.request_id = random_request_id();
    begin_request(req, false);
    send_error_json(status, message);
  }
  void send_error_json(int status, const std::string& message) {
    JsonWriter w;
    w.begin_object().key("error").begin_object().key("message").value(message);
    w.key("type").value("invalid_request_error").key("param").null().key("code").null().end_object().end_object();
    send(status, "application/json", w.str());
  }

  void enqueue(std::string bytes) {
    write_queue_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    if (closed_ || write_queue_.empty()) return;
    writing_ = true;
    net::async_write(stream_.socket(), net::buffer(write_queue_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) return peer_gone();
    write_queue_.pop_front();
    if (!write_queue_.empty()) return write_next();
    if (final_queued_) finish_response();
  }

  void finish_response() {
    log_line();
    disconnect_fn_ = nullptr;
    if (!keep_alive_ || server_.stopped) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return drain_and_close();
    }
    if (watching_) {
      resume_read_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
    } else {
      do_read();
    }
  }

  // Lingering close: reads (and drops) what the client still sends, e.g. the rest of a
  // body over the limit, so that it sees our response instead of a connection reset.
  void drain_and_close() {
    if (closed_ || watching_) return close();
    if (drained_bytes_ > (64 << 20)) return close();
    stream_.expires_after(std::chrono::seconds(5));
    stream_.async_read_some(net::buffer(drain_buffer_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_bytes_ += static_cast<int64_t>(n);
      if (ec) return self->close();
      self->drain_and_close();
    });
  }

  void log_line() {
    if (!server_.options.access_log || logged_) return;
    logged_ = true;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    JsonWriter w;
    w.begin_object().key("ts").value(static_cast<int64_t>(std::time(nullptr)));
    w.key("method").value(method_).key("path").value(path_).key("status").value(static_cast<int64_t>(status_));
    w.key("duration_ms").value(static_cast<float>(ms)).key("request_id").value(request_id_);
    if (log_fields_.prompt_tokens >= 0) w.key("prompt_tokens").value(log_fields_.prompt_tokens);
    if (log_fields_.completion_tokens >= 0) w.key("completion_tokens").value(log_fields_.completion_tokens);
    if (log_fields_.engine_ms >= 0) w.key("engine_ms").value(static_cast<float>(log_fields_.engine_ms));
    w.end_object();
    server_.write_access_log(w.str() + "\n");
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    --server_.num_connections;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> write_queue_;  // bytes waiting to be written, in order
  bool writing_ = false;
  bool watching_ = false;
  bool resume_read_ = false;
  bool final_queued_ = true;  // the current response's last bytes are queued
  bool streaming_ = false;
  bool keep_alive_ = true;
  bool closed_ = false;
  char watch_byte_ = 0;
  std::array<char, 16384> drain_buffer_{};
  int64_t drained_bytes_ = 0;
  int status_ = 0;
  std::function<void()> disconnect_fn_;
  std::string request_id_, method_, path_;
  bool logged_ = true;  // the current request has its access log line
  Clock::time_point start_;
  AccessLogFields log_fields_;
};

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    } else {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<HttpSession>(std::move(socket), *this)->start();
    }
    do_accept();
  });
}

// ---- HttpResponder ----

void HttpResponder::send(int status, std::string content_type, std::string body) {
  net::post(session_->executor(),
            [s = session_, status, ct = std::move(content_type), b = std::move(body)] { s->send(status, ct, b); });
}
void HttpResponder::start_events() {
  net::post(session_->executor(), [s = session_] { s->start_events(); });
}
void HttpResponder::send_event(std::string data) {
  net::post(session_->executor(), [s = session_, d = std::move(data)] { s->send_event(d); });
}
void HttpResponder::end_events() {
  net::post(session_->executor(), [s = session_] { s->end_events(); });
}
void HttpResponder::post(std::function<void()> fn) { net::post(session_->executor(), std::move(fn)); }
void HttpResponder::on_disconnect(std::function<void()> fn) {
  net::post(session_->executor(), [s = session_, f = std::move(fn)]() mutable { s->set_disconnect(std::move(f)); });
}
void HttpResponder::set_log_fields(AccessLogFields fields) {
  net::post(session_->executor(), [s = session_, fields] { s->set_log_fields(fields); });
}

// ---- HttpServer ----

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  beast::error_code ec;
  const auto address = net::ip::make_address(impl_->options.host, ec);
  if (ec) return invalid_argument("--host '" + impl_->options.host + "' is not an IP address: " + ec.message());
  const tcp::endpoint endpoint(address, impl_->options.port);
  const std::string where = impl_->options.host + ":" + std::to_string(impl_->options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return failed_precondition("cannot listen on " + where + ": " + ec.message() + " (pick another --port)");
  impl_->work.emplace(net::make_work_guard(impl_->ioc));
  impl_->do_accept();
  for (int i = 0; i < std::max(1, impl_->options.num_io_threads); ++i) {
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  }
  return Status();
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpServer::stop_accepting() {
  impl_->stopped = true;
  net::post(impl_->ioc, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
}

void HttpServer::stop() {
  if (impl_->threads.empty()) return;
  impl_->stopped = true;
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

int64_t HttpServer::num_connections() const { return impl_->num_connections; }

}  // namespace vosti
