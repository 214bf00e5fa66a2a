// The HTTP layer alone (no engine): framing, keep-alive, body limit, SSE chunking,
// and the disconnect callback that aborts engine requests.
#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

namespace vosti {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Sends raw bytes and reads until `done(reply)` or the peer closes.
std::string exchange(tcp::socket& s, const std::string& bytes, const std::function<bool(const std::string&)>& done) {
  net::write(s, net::buffer(bytes));
  std::string reply;
  char buf[4096];
  boost::system::error_code ec;
  while (!done(reply)) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    reply.append(buf, n);
  }
  return reply;
}

bool has_full_body(const std::string& r) {
  const size_t head_end = r.find("\r\n\r\n");
  const size_t cl = r.find("Content-Length: ");
  if (head_end == std::string::npos || cl == std::string::npos) return false;
  return r.size() >= head_end + 4 + std::stoul(r.substr(cl + 16));
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpHandler handler, int64_t max_body = 1 << 20) {
    HttpServerOptions o;
    o.port = 0;
    o.max_body_bytes = max_body;
    o.access_log = false;
    server_ = std::make_unique<HttpServer>(o, std::move(handler));
    ASSERT_TRUE(server_->start().ok());
  }
  tcp::socket connect() {
    tcp::socket s(ioc_);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
    return s;
  }
  net::io_context ioc_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnswersAndKeepsTheConnectionAlive) {
  start([](const HttpRequest& r, std::shared_ptr<HttpResponder> w) {
    w->send(r.path == "/a" ? 200 : 404, "text/plain", r.method + " " + r.path + " " + r.body);
  });
  auto s = connect();
  std::string r1 = exchange(s, "POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", has_full_body);
  EXPECT_EQ(r1.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r1;
  EXPECT_NE(r1.find("\r\n\r\nPOST /a abc"), std::string::npos) << r1;
  std::string r2 = exchange(s, "GET /b HTTP/1.1\r\nHost: h\r\n\r\n", has_full_body);
  EXPECT_EQ(r2.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r2;
}

TEST_F(HttpServerTest, RejectsBodiesOverTheLimitWith413) {
  start([](const HttpRequest&, std::shared_ptr<HttpResponder> w) { w->send(200, "text/plain", "ok"); }, 100);
  auto s = connect();
  std::string r = exchange(s, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'x'),
                           has_full_body);
  EXPECT_EQ(r.rfind("HTTP/1.1 413 ", 0), 0u) << r;
  EXPECT_NE(r.find("--max-body-bytes"), std::string::npos);
}

TEST_F(HttpServerTest, StreamsServerSentEventsAsChunks) {
  start([](const HttpRequest&, std::shared_ptr<HttpResponder> w) {
    w->start_events();
    w->send_event("data: {\"a\":1}\n\n");
    w->send_event("data: [DONE]\n\n");
    w->end_events();
  });
  auto s = connect();
  std::string r = exchange(s, "GET /s HTTP/1.1\r\nHost: h\r\n\r\n",
                           [](const std::string& x) { return x.find("0\r\n\r\n") != std::string::npos; });
  EXPECT_NE(r.find("Content-Type: text/event-stream"), std::string::npos);
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(r.find("\r\nf\r\ndata: {\"a\":1}\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos) << r;
}

TEST_F(HttpServerTest, ClientThatGoesAwayTriggersTheDisconnectCallback) {
  std::atomic<int> disconnects{0};
  std::shared_ptr<HttpResponder> held;  // the response never ends on its own
  std::mutex mu;
  start([&](const HttpRequest&, std::shared_ptr<HttpResponder> w) {
    w->on_disconnect([&] { ++disconnects; });
    w->start_events();
    std::lock_guard<std::mutex> lock(mu);
    held = w;
  });
  {
    auto s = connect();
    exchange(s, "GET /s HTTP/1.1\r\nHost: h\r\n\r\n",
             [](const std::string& x) { return x.find("\r\n\r\n") != std::string::npos; });
  }  // closes the socket mid-stream
  for (int i = 0; i < 200 && disconnects == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(disconnects, 1);
  EXPECT_EQ(server_->num_connections(), 0);
  std::lock_guard<std::mutex> lock(mu);
  held->send_event("data: late\n\n");  // writing to a gone client is a no-op, not a crash
}

}  // namespace
}  // namespace vosti
