#pragma once
// Test-only HTTP/1.1 server on 127.0.0.1 with full control over the bytes on
// the wire (chunk boundaries, delays, abrupt closes) and optional TLS
// (server certificate, optional required client certificate). Each connection
// is served by its own thread; keep-alive is supported.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kube::testing {

struct HttpRequest {
  std::string method;
  std::string target;  // path?query as sent
  std::string path;
  std::map<std::string, std::string> query;    // decoded
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class Conn {
 public:
  virtual ~Conn() = default;
  virtual bool Write(std::string_view bytes) = 0;  // false once the peer is gone
  // Close the connection after the handler returns (no keep-alive).
  void CloseAfter() { close_after_ = true; }
  bool close_after() const { return close_after_; }

  bool Respond(int status, const std::string& body,
               const std::vector<std::pair<std::string, std::string>>& headers = {},
               const std::string& content_type = "application/json");
  bool StartChunked(int status, const std::string& content_type = "application/json");
  bool Chunk(std::string_view data);  // one HTTP chunk, sent at once
  bool EndChunked();

 private:
  bool close_after_ = false;
};

using Handler = std::function<void(const HttpRequest&, Conn&)>;

struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // non-empty → client certificate required
};

class FakeServer {
 public:
  explicit FakeServer(Handler handler, std::optional<TlsOptions> tls = std::nullopt);
  ~FakeServer();
  int port() const { return port_; }
  std::string url() const;
  int requests() const { return requests_.load(); }
  // Abruptly closes every open connection (simulates a dropped watch / restart).
  void DropConnections();
  void Stop();

 private:
  void AcceptLoop();
  void Serve(int fd);
  Handler handler_;
  std::optional<TlsOptions> tls_;
  void* ssl_ctx_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::set<int> open_fds_;
  std::vector<std::thread> conn_threads_;
};

// Test PKI generated with the openssl CLI in `dir`: a CA, a server cert for
// IP 127.0.0.1, a server cert for the wrong host name, a client cert, and an
// unrelated CA. Returns false (with a message) if openssl failed.
struct TestPki {
  std::string ca_crt, ca_key, server_crt, server_key, wrong_host_crt, wrong_host_key, client_crt,
      client_key, other_ca_crt;
};
bool MakeTestPki(const std::string& dir, TestPki* pki, std::string* error);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data, int mode = 0644);
// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir(const std::string& prefix);

}  // namespace kube::testing
