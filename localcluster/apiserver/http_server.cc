#include "localcluster/apiserver/http_server.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

namespace kubelocal {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr size_t kBodyLimit = 3 * 1024 * 1024 + 1024;

class BeastSink : public ResponseSink {
 public:
  BeastSink(ssl::stream<tcp::socket>& s, bool keep_alive, unsigned version)
      : s_(s), keep_alive_(keep_alive), version_(version) {}

  void Send(int code, const std::string& content_type, const std::string& body,
            const std::map<std::string, std::string>& extra) override {
    http::response<http::string_body> res{static_cast<http::status>(code), version_};
    res.set(http::field::server, "kube-local");
    res.set(http::field::content_type, content_type);
    res.set("Cache-Control", "no-cache, private");
    for (const auto& [k, v] : extra) res.set(k, v);
    res.keep_alive(keep_alive_);
    res.body() = body;
    res.prepare_payload();
    beast::error_code ec;
    http::write(s_, res, ec);
    code_ = code;
    if (ec) failed_ = true;
  }

  bool StartStream(const std::string& content_type) override {
    http::response<http::empty_body> res{http::status::ok, version_};
    res.set(http::field::server, "kube-local");
    res.set(http::field::content_type, content_type);
    res.set("Cache-Control", "no-cache, private");
    res.keep_alive(keep_alive_);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    http::write_header(s_, sr, ec);
    code_ = 200;
    streaming_ = true;
    if (ec) failed_ = true;
    return !ec;
  }

  bool WriteChunk(const std::string& data) override {
    if (failed_) return false;
    beast::error_code ec;
    net::write(s_, http::make_chunk(net::buffer(data)), ec);
    if (ec) failed_ = true;
    return !ec;
  }

  void EndStream() override {
    if (failed_) return;
    beast::error_code ec;
    net::write(s_, http::make_chunk_last(), ec);
    if (ec) failed_ = true;
  }

  bool PeerClosed() override {
    pollfd p{s_.next_layer().native_handle(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) < 0) return true;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  int code() const { return code_; }
  bool failed() const { return failed_; }
  bool streamed() const { return streaming_; }

 private:
  ssl::stream<tcp::socket>& s_;
  bool keep_alive_;
  unsigned version_;
  int code_ = 0;
  bool failed_ = false;
  bool streaming_ = false;
};

// Subject CN and O entries of a verified peer certificate.
void PeerIdentity(SSL* ssl, std::string* user, std::vector<std::string>* groups) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (!cert) return;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    X509_NAME* name = X509_get_subject_name(cert);
    for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
      X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
      int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
      unsigned char* utf8 = nullptr;
      int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e));
      if (n < 0) continue;
      std::string v(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
      if (nid == NID_commonName) *user = v;
      if (nid == NID_organizationName) groups->push_back(v);
    }
  }
  X509_free(cert);
}

}  // namespace

struct HttpServer::Impl {
  Handler handler;
  HttpServerOptions options;
  net::io_context io;
  ssl::context ctx{ssl::context::tls_server};
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread accept_thread;
  std::mutex mu;
  std::condition_variable cv;
  std::set<int> open_fds;
  int active = 0;
  std::atomic<bool> stopping{false};

  void AcceptLoop() {
    while (!stopping) {
      beast::error_code ec;
      tcp::socket sock(io);
      acceptor->accept(sock, ec);
      if (ec) {
        if (stopping) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      std::lock_guard<std::mutex> l(mu);
      if (stopping) return;
      int fd = sock.native_handle();
      open_fds.insert(fd);
      ++active;
      std::thread([this, s = std::move(sock), fd]() mutable {
        Serve(std::move(s));
        std::lock_guard<std::mutex> l2(mu);
        open_fds.erase(fd);
        --active;
        cv.notify_all();
      }).detach();
    }
  }

  void Serve(tcp::socket sock) {
    timeval tv{options.idle_timeout_seconds, 0};
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ssl::stream<tcp::socket> stream(std::move(sock), ctx);
    beast::error_code ec;
    stream.handshake(ssl::stream_base::server, ec);
    if (ec) {
      spdlog::debug("TLS handshake failed: {}", ec.message());
      return;
    }
    std::string user;
    std::vector<std::string> groups;
    PeerIdentity(stream.native_handle(), &user, &groups);
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(kBodyLimit);
      parser.header_limit(64 * 1024);
      http::read(stream, buffer, parser, ec);
      if (ec) break;
      auto& msg = parser.get();
      HttpRequest req;
      req.method = std::string(msg.method_string());
      std::string target(msg.target());
      auto q = target.find('?');
      req.path = PercentDecode(target.substr(0, q));
      if (q != std::string::npos) req.query = ParseQuery(target.substr(q + 1));
      for (const auto& f : msg) {
        std::string name(f.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        req.headers[name] = std::string(f.value());
      }
      req.body = std::move(msg.body());
      req.client_cert_user = user;
      req.client_cert_groups = groups;
      BeastSink sink(stream, msg.keep_alive(), msg.version());
      auto start = std::chrono::steady_clock::now();
      handler(req, sink);
      spdlog::debug("{} {} -> {} ({} ms)", req.method, target, sink.code(),
                    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
                        .count());
      if (sink.failed() || !msg.keep_alive()) break;
    }
    stream.shutdown(ec);
  }
};

HttpServer::HttpServer(Handler handler, HttpServerOptions options) : impl_(new Impl) {
  impl_->handler = std::move(handler);
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Listen() {
  auto& o = impl_->options;
  try {
    impl_->ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1);
    impl_->ctx.use_certificate_chain(net::buffer(o.server.cert_pem));
    impl_->ctx.use_private_key(net::buffer(o.server.key_pem), ssl::context::pem);
    if (!o.ca_pem.empty()) {
      impl_->ctx.add_certificate_authority(net::buffer(o.ca_pem));
      // Ask for a client certificate; require one only when told to.
      impl_->ctx.set_verify_mode(o.require_client_cert ? ssl::verify_peer | ssl::verify_fail_if_no_peer_cert
                                                       : ssl::verify_peer);
    }
    auto addr = net::ip::make_address(o.host);
    impl_->acceptor = std::make_unique<tcp::acceptor>(impl_->io);
    tcp::endpoint ep(addr, static_cast<unsigned short>(o.port));
    impl_->acceptor->open(ep.protocol());
    impl_->acceptor->set_option(net::socket_base::reuse_address(true));
    impl_->acceptor->bind(ep);
    impl_->acceptor->listen(net::socket_base::max_listen_connections);
    port_ = impl_->acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return InternalError(std::string("cannot listen on ") + o.host + ":" + std::to_string(o.port) +
                         ": " + e.what());
  }
  return Status();
}

void HttpServer::Serve() {
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  if (impl_->acceptor) ::shutdown(impl_->acceptor->native_handle(), SHUT_RDWR);
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  std::unique_lock<std::mutex> l(impl_->mu);
  for (int fd : impl_->open_fds) ::shutdown(fd, SHUT_RDWR);
  impl_->cv.wait_for(l, std::chrono::seconds(5), [&] { return impl_->active == 0; });
  beast::error_code ec;
  if (impl_->acceptor) impl_->acceptor->close(ec);
}

}  // namespace kubelocal
