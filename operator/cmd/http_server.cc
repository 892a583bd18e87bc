#include "operator/cmd/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace hypertrain::operatorcmd {
namespace {

const char* StatusText(int s) {
  switch (s) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 503:
      return "Service Unavailable";
  }
  return "Error";
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::Start(const std::string& addr, std::string* error) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    *error = "address must be host:port or :port, got '" + addr + "'";
    return false;
  }
  const std::string host = addr.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(addr.substr(colon + 1));
  } catch (...) {
    *error = "bad port in '" + addr + "'";
    return false;
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty() || host == "0.0.0.0") {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &sa.sin_addr) != 1) {
    *error = "bad IPv4 host in '" + addr + "'";
    return false;
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(listen_fd_, 64) != 0) {
    *error = "cannot listen on " + addr + ": " + std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  socklen_t len = sizeof(sa);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void HttpServer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::Loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;  // wake up regularly to notice Stop()
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd);
    ::close(fd);
  }
}

void HttpServer::Serve(int fd) {
  std::string req;
  char buf[1024];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) return;  // slow or silent client
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  HttpResponse resp;
  const auto sp1 = req.find(' ');
  const auto sp2 = sp1 == std::string::npos ? sp1 : req.find(' ', sp1 + 1);
  std::string path = sp2 == std::string::npos ? "" : req.substr(sp1 + 1, sp2 - sp1 - 1);
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  if (req.compare(0, 4, "GET ") != 0) {
    resp = {405, "text/plain; charset=utf-8", "only GET\n"};
  } else if (auto it = handlers_.find(path); it != handlers_.end()) {
    resp = it->second();
  } else {
    resp = {404, "text/plain; charset=utf-8", "not found\n"};
  }
  WriteAll(fd, "HTTP/1.1 " + std::to_string(resp.status) + " " + StatusText(resp.status) +
                   "\r\nContent-Type: " + resp.content_type + "\r\nContent-Length: " +
                   std::to_string(resp.body.size()) + "\r\nConnection: close\r\n\r\n" + resp.body);
}

}  // namespace hypertrain::operatorcmd
