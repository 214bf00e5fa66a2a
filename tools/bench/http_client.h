// A small HTTP/1.1 client for `vosti bench`: one connection per request (Connection: close),
// plain http:// only, bodies streamed to a callback as they arrive (chunked, Content-Length
// or until close), and Server-Sent Events split from a streamed body. Every wait is bounded:
// connect and each read wait at most the given timeout, in slices that check a cancel flag,
// so a dead or stalled server ends a request with an error, never a hang.
// Thread safety: HttpResponseParser and SseParser are single-owner values; http_exchange may
// run on many threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace vosti::bench {

// http://HOST[:PORT][/PREFIX]; the prefix (e.g. "/v1" is not implied) is put before every path.
struct BaseUrl {
  std::string host;
  int port = 80;
  std::string prefix;             // "" or "/something", no trailing slash
  std::string authority() const;  // "host:port", an IPv6 host in brackets
  std::string to_string() const;
};
// Errors: kInvalidArgument naming the URL (https, no host, a bad port).
Result<BaseUrl> parse_base_url(const std::string& url);

// Incremental parser of one HTTP/1.1 response: status line, headers, then the body, decoded
// from chunked transfer encoding or delimited by Content-Length or the connection's end.
class HttpResponseParser {
 public:
  // Consumes `bytes`; appends decoded body bytes to `body`. Errors: kDataLoss for a malformed response.
  Status feed(std::string_view bytes, std::string& body);
  // The connection closed: completes a body delimited by the close. Errors: kDataLoss if truncated.
  Status finish_at_close();
  bool headers_done() const { return state_ != State::kHead; }
  bool complete() const { return state_ == State::kDone; }
  int status() const { return status_; }
  // Header value by lower-case name ("" if absent).
  std::string header(const std::string& lower_name) const;

 private:
  enum class State : uint8_t { kHead, kChunkSize, kChunkData, kChunkDataEnd, kTrailer, kLength, kUntilClose, kDone };
  Status parse_head();
  std::string buffer_;  // unparsed bytes
  State state_ = State::kHead;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  int64_t remaining_ = 0;  // bytes left in the current chunk or the Content-Length body
};

// Splits a text/event-stream body into events: returns the "data:" payloads (joined by "\n"
// when an event has several data lines) of every event completed by `bytes`.
class SseParser {
 public:
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string line_;  // the current, incomplete line
  std::string data_;  // data lines of the current event
  bool has_data_ = false;
};

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // after the base URL's prefix, e.g. "/v1/completions"
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpExchangeOptions {
  double connect_timeout_s = 10;
  double read_timeout_s = 600;  // longest silence between two reads
  const std::atomic<bool>* cancel = nullptr;
};

// How an exchange ended; `transport_error` is set when no complete response came back.
struct HttpOutcome {
  int status = 0;
  bool connected = false;  // the TCP connection was made
  bool timed_out = false;  // the server went silent for read_timeout_s
  std::string transport_error;
};

// Sends `request` and calls on_body with each piece of the decoded body as it arrives (after
// the headers; `status` is the response's). on_body returns false to stop reading.
HttpOutcome http_exchange(const BaseUrl& url, const HttpRequest& request, const HttpExchangeOptions& options,
                          const std::function<bool(int status, std::string_view body)>& on_body);

// A whole response body (for /v1/models, /metrics); errors name the URL and path.
struct HttpReply {
  int status = 0;
  std::string body;
};
Result<HttpReply> http_get(const BaseUrl& url, const std::string& path,
                           const std::vector<std::pair<std::string, std::string>>& headers, double timeout_s);
// POST a JSON body (Content-Type set here); the whole reply (the protocol client, /reset_prefix_cache).
Result<HttpReply> http_post(const BaseUrl& url, const std::string& path, std::string body,
                            std::vector<std::pair<std::string, std::string>> headers, double timeout_s);
// Any request, whole reply; connect and every read wait at most timeout_s.
Result<HttpReply> http_request(const BaseUrl& url, const HttpRequest& request, double timeout_s);

}  // namespace vosti::bench
