#include "localcluster/testing/https_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>  // before Boost.Asio: its C++20 awaitable needs std::exchange

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace kubelocal::testing {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

struct Conn {
  net::io_context io;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> stream;
};

bool Connect(const ClientConfig& c, Conn& conn, std::string* error) {
  try {
    conn.ctx.add_certificate_authority(net::buffer(c.ca_pem));
    conn.ctx.set_verify_mode(ssl::verify_peer);
    if (!c.client_cert_pem.empty()) {
      conn.ctx.use_certificate_chain(net::buffer(c.client_cert_pem));
      conn.ctx.use_private_key(net::buffer(c.client_key_pem), ssl::context::pem);
    }
    conn.stream = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(conn.io, conn.ctx);
    conn.stream->set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    auto& tcp_layer = beast::get_lowest_layer(*conn.stream);
    tcp_layer.expires_after(std::chrono::seconds(c.timeout_seconds));
    tcp_layer.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(c.port)));
    // Beast's timeouts only cover async operations; sync reads use SO_RCVTIMEO.
    timeval tv{c.timeout_seconds, 0};
    ::setsockopt(tcp_layer.socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(tcp_layer.socket().native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    conn.stream->handshake(ssl::stream_base::client);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

http::request<http::string_body> MakeRequest(const ClientConfig& c, const std::string& method,
                                             const std::string& target, const std::string& body,
                                             const std::string& content_type,
                                             const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(c.port));
  if (!c.token.empty()) req.set(http::field::authorization, "Bearer " + c.token);
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty()) {
    req.set(http::field::content_type, content_type);
    req.body() = body;
  }
  req.prepare_payload();
  return req;
}

}  // namespace

HttpResponse Request(const ClientConfig& c, const std::string& method, const std::string& target,
                     const std::string& body, const std::string& content_type,
                     const std::map<std::string, std::string>& headers) {
  HttpResponse out;
  Conn conn;
  if (!Connect(c, conn, &out.error)) return out;
  try {
    auto req = MakeRequest(c, method, target, body, content_type, headers);
    http::write(*conn.stream, req);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(*conn.stream, buf, parser);
    auto& res = parser.get();
    out.code = res.result_int();
    for (const auto& f : res) out.headers[std::string(f.name_string())] = std::string(f.value());
    out.body = res.body();
    beast::error_code ec;
    conn.stream->shutdown(ec);
  } catch (const std::exception& e) {
    out.code = 0;
    out.error = e.what();
  }
  return out;
}

int Stream(const ClientConfig& c, const std::string& target,
           const std::function<bool(const std::string& line)>& on_line,
           std::chrono::steady_clock::time_point deadline, std::string* error,
           std::vector<uint64_t>* chunk_sizes) {
  Conn conn;
  std::string err;
  if (!Connect(c, conn, &err)) {
    if (error) *error = err;
    return 0;
  }
  try {
    auto req = MakeRequest(c, "GET", target, "", "", {});
    http::write(*conn.stream, req);
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 1000) left = std::chrono::microseconds(1000);
    timeval tv{static_cast<time_t>(left.count() / 1000000), static_cast<suseconds_t>(left.count() % 1000000)};
    ::setsockopt(beast::get_lowest_layer(*conn.stream).socket().native_handle(), SOL_SOCKET,
                 SO_RCVTIMEO, &tv, sizeof(tv));
    beast::flat_buffer buf;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    auto on_chunk = [chunk_sizes](std::uint64_t size, boost::string_view, beast::error_code&) {
      if (size > 0) chunk_sizes->push_back(size);
    };
    if (chunk_sizes) parser.on_chunk_header(on_chunk);
    http::read_header(*conn.stream, buf, parser);
    int code = parser.get().result_int();
    std::string pending;
    char chunk[8192];
    // Asio's sync reads retry EAGAIN forever (SO_RCVTIMEO does not bound them),
    // so a watchdog shuts the socket down at the deadline.
    const int fd = beast::get_lowest_layer(*conn.stream).socket().native_handle();
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> l(mu);
      if (!cv.wait_until(l, deadline, [&] { return finished; })) ::shutdown(fd, SHUT_RDWR);
    });
    struct Join {
      std::mutex& mu;
      std::condition_variable& cv;
      bool& finished;
      std::thread& t;
      ~Join() {
        {
          std::lock_guard<std::mutex> l(mu);
          finished = true;
        }
        cv.notify_all();
        t.join();
      }
    } join{mu, cv, finished, watchdog};
    while (!parser.is_done() && std::chrono::steady_clock::now() < deadline) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      beast::error_code ec;
      http::read_some(*conn.stream, buf, parser, ec);
      if (ec && ec != http::error::need_buffer) break;
      pending.append(chunk, sizeof(chunk) - parser.get().body().size);
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        if (!on_line(line)) return code;
      }
    }
    if (!pending.empty()) on_line(pending);
    return code;
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return 0;
  }
}

}  // namespace kubelocal::testing
