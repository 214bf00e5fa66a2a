// HttpServer: an HTTP/1.1 server on Boost.Beast/Asio for the OpenAI API.
//
// A fixed pool of I/O threads runs every connection asynchronously, each on its own
// strand, so an idle or streaming connection costs a socket and a few buffers, never
// a thread. Beast parses requests (with a body size limit: 413 above it); responses
// are written as raw bytes: a full body with Content-Length, or Server-Sent Events as
// chunked transfer encoding. While a response is pending, a 1-byte read watches the
// socket so that a client that goes away is noticed at once (its disconnect callback
// then aborts the engine request), whether or not anything is being written.
//
// Thread safety: HttpResponder's methods may be called from any thread (they post to
// the connection's strand). The handler runs on the connection's strand and must not
// block. start()/stop_accepting()/stop() are for the owning thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace vosti {

class HttpSession;

// Extra fields of a request's access log line (negative: absent).
struct AccessLogFields {
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  double engine_ms = -1;  // from the first add_request to the last output, on the engine thread
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // target without the query string
  std::string query;   // the target after '?', empty if none (not decoded)
  std::string body;
  std::string authorization;  // the Authorization header, empty if absent
  std::string request_id;     // X-Request-Id if the client sent one, else generated
  std::string deployment_id;  // X-Vosti-Deployment-Id: the deployment the request pins, empty if none
};

// What a handler answers one request through. Every method is thread-safe.
class HttpResponder {
 public:
  explicit HttpResponder(std::shared_ptr<HttpSession> session) : session_(std::move(session)) {}

  // A complete response; ends the request.
  void send(int status, std::string content_type, std::string body);
  // 200 with Content-Type text/event-stream; then send_event()s; then end_events().
  void start_events();
  void send_event(std::string data);  // data must already be "data: ...\n\n"
  void end_events();
  // Runs `fn` on the connection's strand: one request's state needs no lock.
  void post(std::function<void()> fn);
  // `fn` runs on the strand if the client goes away before the response ended.
  void on_disconnect(std::function<void()> fn);
  // Fields for the access log line.
  void set_log_fields(AccessLogFields fields);

 private:
  std::shared_ptr<HttpSession> session_;
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpResponder>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (see HttpServer::port())
  int num_io_threads = 2;
  int64_t max_body_bytes = 8 << 20;
  int idle_timeout_s = 300;  // keep-alive connections idle longer are closed
  bool access_log = true;    // one JSON line per request on stderr
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. UNAVAILABLE-style errors name the address.
  Status start();
  // The bound port (after start()).
  uint16_t port() const;
  // Closes the listening socket; open connections continue.
  void stop_accepting();
  // Stops the I/O threads and closes every connection. Idempotent.
  void stop();
  // Connections open now.
  int64_t num_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vosti
