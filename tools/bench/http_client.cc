#include "tools/bench/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace vosti::bench {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// A connected socket, closed on destruction.
class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

using Clock = std::chrono::steady_clock;

// Why a wait on a socket ended.
struct WaitOutcome {
  enum Kind : uint8_t { kReady, kTimedOut, kCancelled, kError } kind = kReady;
  std::string message;  // empty when ready
};

// Waits for `events` on fd up to timeout_s, in 100 ms slices that check `cancel`.
WaitOutcome wait_fd(int fd, short events, double timeout_s, const std::atomic<bool>* cancel) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    if (cancel && cancel->load()) return {WaitOutcome::kCancelled, "cancelled"};
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "no response for %g s (timed out)", timeout_s);
      return {WaitOutcome::kTimedOut, buf};
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min(left, 0.1) * 1000) + 1);
    if (rc > 0) return {};
    if (rc < 0 && errno != EINTR) return {WaitOutcome::kError, std::string("poll: ") + std::strerror(errno)};
  }
}

// Connects to url within the timeout; returns the error text or "".
std::string connect_to(const BaseUrl& url, const HttpExchangeOptions& o, Socket& sock) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return "cannot resolve " + url.host + ": " + gai_strerror(rc);
  std::string error = "no address for " + url.host;
  for (addrinfo* a = found; a; a = a->ai_next) {
    sock.reset(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (sock.fd() < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(sock.fd(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
      continue;
    }
    error = wait_fd(sock.fd(), POLLOUT, o.connect_timeout_s, o.cancel).message;
    if (error.empty()) {
      int so_error = 0;
      socklen_t len = sizeof so_error;
      ::getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error == 0) break;
      error = std::strerror(so_error);
    }
  }
  ::freeaddrinfo(found);
  if (!error.empty()) {
    sock.reset(-1);
    return "cannot connect to " + url.to_string() + ": " + error;
  }
  const int one = 1;
  ::setsockopt(sock.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return "";
}

std::string send_all(int fd, std::string_view data, const HttpExchangeOptions& o) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return std::string("send: ") + std::strerror(errno);
    if (WaitOutcome w = wait_fd(fd, POLLOUT, o.read_timeout_s, o.cancel); w.kind != WaitOutcome::kReady)
      return w.message;
  }
  return "";
}

}  // namespace

std::string BaseUrl::authority() const {
  const std::string h = host.find(':') == std::string::npos ? host : "[" + host + "]";
  return h + ":" + std::to_string(port);
}

std::string BaseUrl::to_string() const { return "http://" + authority() + prefix; }

Result<BaseUrl> parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    return invalid_argument("--base-url " + url + ": https is not supported; use http:// (or a local TLS proxy)");
  if (url.rfind(scheme, 0) != 0) return invalid_argument("--base-url " + url + ": must start with http://");
  std::string rest = url.substr(scheme.size());
  BaseUrl out;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    out.prefix = rest.substr(slash);
    rest = rest.substr(0, slash);
    while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  }
  // HOST, HOST:PORT, [V6], [V6]:PORT
  const size_t bracket = rest.rfind(']');
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket) &&
      (rest.front() == '[' || rest.find(':') == colon)) {
    const std::string port = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) || std::stoi(port) < 1 ||
        std::stoi(port) > 65535)
      return invalid_argument("--base-url " + url + ": '" + port + "' is not a port (1-65535)");
    out.port = std::stoi(port);
  }
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
  if (rest.empty()) return invalid_argument("--base-url " + url + ": no host");
  out.host = rest;
  return out;
}

std::string HttpResponseParser::header(const std::string& lower_name) const {
  auto it = headers_.find(lower_name);
  return it == headers_.end() ? "" : it->second;
}

Status HttpResponseParser::parse_head() {
  const size_t end = buffer_.find("\r\n\r\n");
  const std::string head = buffer_.substr(0, end);
  buffer_.erase(0, end + 4);
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12)
    return data_loss("not an HTTP/1.x response: '" + status_line.substr(0, 60) + "'");
  status_ = std::atoi(status_line.c_str() + 9);
  while (line_end != std::string::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    headers_[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  if (lower(header("transfer-encoding")).find("chunked") != std::string::npos) {
    state_ = State::kChunkSize;
  } else if (const std::string len = header("content-length"); !len.empty()) {
    remaining_ = std::atoll(len.c_str());
    state_ = remaining_ > 0 ? State::kLength : State::kDone;
  } else {
    state_ = State::kUntilClose;
  }
  return Status();
}

Status HttpResponseParser::feed(std::string_view bytes, std::string& body) {
  buffer_.append(bytes);
  while (true) {
    switch (state_) {
      case State::kHead:
        if (buffer_.find("\r\n\r\n") == std::string::npos) {
          if (buffer_.size() > (64 << 10)) return data_loss("HTTP response headers over 64 KiB");
          return Status();
        }
        VOSTI_RETURN_IF_ERROR(parse_head());
        break;
      case State::kChunkSize: {
        const size_t eol = buffer_.find("\r\n");
        if (eol == std::string::npos) return Status();
        const std::string size_text = buffer_.substr(0, buffer_.find_first_of(";\r"));
        char* end = nullptr;
        remaining_ = std::strtoll(size_text.c_str(), &end, 16);
        if (size_text.empty() || end == size_text.c_str() || remaining_ < 0)
          return data_loss("bad chunk size '" + size_text.substr(0, 20) + "' in a chunked HTTP body");
        buffer_.erase(0, eol + 2);
        state_ = remaining_ == 0 ? State::kTrailer : State::kChunkData;
        break;
      }
      case State::kChunkData:
      case State::kLength: {
        const size_t n = std::min<size_t>(buffer_.size(), static_cast<size_t>(remaining_));
        body.append(buffer_, 0, n);
        buffer_.erase(0, n);
        remaining_ -= static_cast<int64_t>(n);
        if (remaining_ > 0) return Status();
        state_ = state_ == State::kLength ? State::kDone : State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd:
        if (buffer_.size() < 2) return Status();
        if (buffer_.compare(0, 2, "\r\n") != 0) return data_loss("a chunk of the HTTP body does not end with CRLF");
        buffer_.erase(0, 2);
        state_ = State::kChunkSize;
        break;
      case State::kTrailer: {
        const size_t eol = buffer_.find("\r\n");
        if (eol == std::string::npos) return Status();
        buffer_.erase(0, eol + 2);
        if (eol == 0) state_ = State::kDone;
        break;
      }
      case State::kUntilClose:
        body.append(buffer_);
        buffer_.clear();
        return Status();
      case State::kDone:
        return Status();
    }
  }
}

Status HttpResponseParser::finish_at_close() {
  if (state_ == State::kUntilClose) state_ = State::kDone;
  if (state_ == State::kDone) return Status();
  return data_loss(state_ == State::kHead ? "the server closed the connection before responding"
                                          : "the server closed the connection in the middle of the response");
}

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c != '\n') {
      line_.push_back(c);
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // a blank line ends the event
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (line_.rfind("data:", 0) == 0) {
      std::string_view v(line_);
      v.remove_prefix(5);
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(v);
      has_data_ = true;
    }  // other fields (event:, id:, retry:) and comments (":...") are not used here
    line_.clear();
  }
  return events;
}

HttpOutcome http_exchange(const BaseUrl& url, const HttpRequest& request, const HttpExchangeOptions& options,
                          const std::function<bool(int, std::string_view)>& on_body) {
  HttpOutcome out;
  Socket sock;
  if (std::string e = connect_to(url, options, sock); !e.empty()) {
    out.transport_error = e;
    return out;
  }
  out.connected = true;
  std::string wire = request.method + " " + url.prefix + request.path + " HTTP/1.1\r\nHost: " + url.authority() +
                     "\r\nConnection: close\r\nUser-Agent: vosti-bench\r\n";
  for (const auto& [k, v] : request.headers) wire += k + ": " + v + "\r\n";
  if (request.method != "GET") wire += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  wire += "\r\n" + request.body;
  if (std::string e = send_all(sock.fd(), wire, options); !e.empty()) {
    out.transport_error = "sending to " + url.to_string() + ": " + e;
    return out;
  }
  HttpResponseParser parser;
  std::string body;
  char buf[16384];
  while (!parser.complete()) {
    if (WaitOutcome w = wait_fd(sock.fd(), POLLIN, options.read_timeout_s, options.cancel);
        w.kind != WaitOutcome::kReady) {
      out.transport_error = w.message;
      out.timed_out = w.kind == WaitOutcome::kTimedOut;
      return out;
    }
    const ssize_t n = ::recv(sock.fd(), buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n < 0) {
      out.transport_error = std::string("reading from ") + url.to_string() + ": " + std::strerror(errno);
      return out;
    }
    Status s = n == 0 ? parser.finish_at_close() : parser.feed(std::string_view(buf, static_cast<size_t>(n)), body);
    out.status = parser.status();
    if (!s.ok()) {
      out.transport_error = s.message();
      return out;
    }
    if (!body.empty()) {
      if (!on_body(parser.status(), body)) return out;
      body.clear();
    }
    if (n == 0) break;
  }
  return out;
}

Result<HttpReply> http_get(const BaseUrl& url, const std::string& path,
                           const std::vector<std::pair<std::string, std::string>>& headers, double timeout_s) {
  HttpRequest request;
  request.path = path;
  request.headers = headers;
  return http_request(url, request, timeout_s);
}

Result<HttpReply> http_post(const BaseUrl& url, const std::string& path, std::string body,
                            std::vector<std::pair<std::string, std::string>> headers, double timeout_s) {
  HttpRequest request;
  request.method = "POST";
  request.path = path;
  request.body = std::move(body);
  request.headers = std::move(headers);
  request.headers.emplace_back("Content-Type", "application/json");
  return http_request(url, request, timeout_s);
}

Result<HttpReply> http_request(const BaseUrl& url, const HttpRequest& request, double timeout_s) {
  const std::string& path = request.path;
  HttpExchangeOptions options;
  options.connect_timeout_s = timeout_s;
  options.read_timeout_s = timeout_s;
  HttpReply reply;
  HttpOutcome o = http_exchange(url, request, options, [&reply](int, std::string_view b) {
    reply.body.append(b);
    return true;
  });
  if (!o.transport_error.empty())
    return failed_precondition(request.method + " " + url.to_string() + path + ": " + o.transport_error);
  reply.status = o.status;
  return reply;
}

}  // namespace vosti::bench
