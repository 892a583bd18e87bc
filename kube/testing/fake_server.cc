#include "kube/testing/fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kube::testing {
namespace {

const char* ReasonPhrase(int s) {
  switch (s) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

class FdConn : public Conn {
 public:
  FdConn(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  bool Write(std::string_view b) override {
    while (!b.empty()) {
      int n = ssl_ ? SSL_write(ssl_, b.data(), static_cast<int>(b.size()))
                   : static_cast<int>(send(fd_, b.data(), b.size(), MSG_NOSIGNAL));
      if (n <= 0) return false;
      b.remove_prefix(n);
    }
    return true;
  }
  // Reads some bytes; 0 on EOF/error.
  int Read(char* buf, int cap) {
    return ssl_ ? SSL_read(ssl_, buf, cap) : static_cast<int>(recv(fd_, buf, cap, 0));
  }

 private:
  int fd_;
  SSL* ssl_;
};

}  // namespace

bool Conn::Respond(int status, const std::string& body,
                   const std::vector<std::pair<std::string, std::string>>& headers,
                   const std::string& content_type) {
  std::ostringstream o;
  o << "HTTP/1.1 " << status << " " << ReasonPhrase(status) << "\r\n"
    << "Content-Type: " << content_type << "\r\n"
    << "Content-Length: " << body.size() << "\r\n";
  for (const auto& [k, v] : headers) o << k << ": " << v << "\r\n";
  if (close_after_) o << "Connection: close\r\n";
  o << "\r\n" << body;
  return Write(o.str());
}

bool Conn::StartChunked(int status, const std::string& content_type) {
  CloseAfter();
  std::ostringstream o;
  o << "HTTP/1.1 " << status << " " << ReasonPhrase(status) << "\r\n"
    << "Content-Type: " << content_type << "\r\n"
    << "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  return Write(o.str());
}

bool Conn::Chunk(std::string_view data) {
  if (data.empty()) return true;
  char hdr[32];
  std::snprintf(hdr, sizeof(hdr), "%zx\r\n", data.size());
  std::string s = hdr;
  s.append(data);
  s += "\r\n";
  return Write(s);
}

bool Conn::EndChunked() { return Write("0\r\n\r\n"); }

FakeServer::FakeServer(Handler handler, std::optional<TlsOptions> tls)
    : handler_(std::move(handler)), tls_(std::move(tls)) {
  signal(SIGPIPE, SIG_IGN);  // SSL_write to a vanished client must not kill the test
  if (tls_) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (SSL_CTX_use_certificate_chain_file(ctx, tls_->cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, tls_->key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      throw std::runtime_error("fake server: cannot load " + tls_->cert_file);
    if (!tls_->client_ca_file.empty()) {
      SSL_CTX_load_verify_locations(ctx, tls_->client_ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    ssl_ctx_ = ctx;
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 64) != 0)
    throw std::runtime_error("fake server: bind/listen failed");
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

FakeServer::~FakeServer() {
  Stop();
  if (ssl_ctx_) SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
}

std::string FakeServer::url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

void FakeServer::DropConnections() {
  std::lock_guard<std::mutex> l(mu_);
  for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
}

void FakeServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  close(listen_fd_);
  DropConnections();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> l(mu_);
    threads.swap(conn_threads_);
  }
  for (auto& t : threads) t.join();
}

void FakeServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> l(mu_);
    open_fds_.insert(fd);
    conn_threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeServer::Serve(int fd) {
  SSL* ssl = nullptr;
  bool ok = true;
  if (ssl_ctx_) {
    ssl = SSL_new(static_cast<SSL_CTX*>(ssl_ctx_));
    SSL_set_fd(ssl, fd);
    ok = SSL_accept(ssl) == 1;
    ERR_clear_error();
  }
  FdConn conn(fd, ssl);
  std::string buf;
  while (ok && !stopping_.load()) {
    size_t hdr_end;
    while ((hdr_end = buf.find("\r\n\r\n")) == std::string::npos) {
      char tmp[8192];
      int n = conn.Read(tmp, sizeof(tmp));
      if (n <= 0) {
        ok = false;
        break;
      }
      buf.append(tmp, n);
    }
    if (!ok) break;
    HttpRequest req;
    std::istringstream hs(buf.substr(0, hdr_end));
    std::string line;
    std::getline(hs, line);
    std::istringstream rl(line);
    std::string version;
    rl >> req.method >> req.target >> version;
    while (std::getline(hs, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto c = line.find(':');
      if (c == std::string::npos) continue;
      std::string k = line.substr(0, c), v = line.substr(c + 1);
      for (auto& ch : k) ch = static_cast<char>(std::tolower(ch));
      while (!v.empty() && v[0] == ' ') v.erase(0, 1);
      req.headers[k] = v;
    }
    buf.erase(0, hdr_end + 4);
    size_t clen =
        req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
    while (buf.size() < clen) {
      char tmp[8192];
      int n = conn.Read(tmp, sizeof(tmp));
      if (n <= 0) {
        ok = false;
        break;
      }
      buf.append(tmp, n);
    }
    if (!ok) break;
    req.body = buf.substr(0, clen);
    buf.erase(0, clen);
    auto q = req.target.find('?');
    req.path = UrlDecode(req.target.substr(0, q));
    if (q != std::string::npos) {
      std::string qs = req.target.substr(q + 1);
      std::istringstream qss(qs);
      std::string kv;
      while (std::getline(qss, kv, '&')) {
        auto e = kv.find('=');
        req.query[UrlDecode(kv.substr(0, e))] =
            e == std::string::npos ? "" : UrlDecode(kv.substr(e + 1));
      }
    }
    requests_.fetch_add(1);
    handler_(req, conn);
    if (conn.close_after()) break;
  }
  if (ssl) {
    SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    open_fds_.erase(fd);
  }
  close(fd);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data, int mode) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << data;
  }
  chmod(tmp.c_str(), mode);
  std::rename(tmp.c_str(), path.c_str());
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> b(tmpl.begin(), tmpl.end());
  b.push_back('\0');
  if (!mkdtemp(b.data())) throw std::runtime_error("mkdtemp failed");
  return b.data();
}

bool MakeTestPki(const std::string& d, TestPki* p, std::string* error) {
  p->ca_crt = d + "/ca.crt";
  p->ca_key = d + "/ca.key";
  p->server_crt = d + "/server.crt";
  p->server_key = d + "/server.key";
  p->wrong_host_crt = d + "/wrong.crt";
  p->wrong_host_key = d + "/wrong.key";
  p->client_crt = d + "/client.crt";
  p->client_key = d + "/client.key";
  p->other_ca_crt = d + "/other-ca.crt";
  WriteFile(d + "/server.ext", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  WriteFile(d + "/wrong.ext",
            "subjectAltName=DNS:wrong.example.com\nextendedKeyUsage=serverAuth\n");
  WriteFile(d + "/client.ext", "extendedKeyUsage=clientAuth\n");
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string script =
      "set -e; cd '" + d +
      "'\n"
      "openssl req -x509 " +
      ec +
      " -keyout ca.key -out ca.crt -days 2 -subj /CN=kube-test-ca\n"
      "openssl req -x509 " +
      ec +
      " -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=other-ca\n"
      "for n in server wrong client; do\n"
      "  openssl req " +
      ec +
      " -keyout $n.key -out $n.csr -subj /CN=$n\n"
      "  openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $n.crt"
      " -days 2 -extfile $n.ext\n"
      "done\n";
  WriteFile(d + "/gen.sh", script, 0755);
  std::string cmd = "/bin/sh '" + d + "/gen.sh' >'" + d + "/gen.log' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    *error = "openssl failed: " + ReadFile(d + "/gen.log");
    return false;
  }
  return true;
}

}  // namespace kube::testing
