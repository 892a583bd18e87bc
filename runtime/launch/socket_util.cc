#include "runtime/launch/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hypertrain::launch::net {

namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits for `events` on fd until the deadline.
Status PollFor(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = RemainingMs(deadline);
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return Status::Ok();
    if (r == 0) return DeadlineExceeded(std::string(what) + " timed out");
    if (errno != EINTR) return IoError(Errno(std::string("poll for ") + what));
  }
}

}  // namespace

StatusOr<std::vector<std::string>> ResolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) return Unavailable("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  std::vector<std::string> out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* src = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (::inet_ntop(a->ai_family, src, buf, sizeof(buf))) {
      bool dup = false;
      for (const auto& s : out) dup |= s == buf;
      if (!dup) out.emplace_back(buf);
    }
  }
  ::freeaddrinfo(res);
  if (out.empty()) return Unavailable("'" + host + "' resolved to no address");
  return out;
}

StatusOr<Fd> ConnectNumeric(const std::string& ip, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int rc = ::getaddrinfo(ip.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0) return InvalidArgument("bad address '" + ip + "': " + ::gai_strerror(rc));
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) {
    ::freeaddrinfo(res);
    return IoError(Errno("socket"));
  }
  const int c = ::connect(fd.get(), res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (c != 0 && errno != EINPROGRESS) return Unavailable(Errno("connect " + ip + ":" + port_s));
  if (c != 0) {
    HT_RETURN_IF_ERROR(PollFor(fd.get(), POLLOUT, Clock::now() + timeout, "connect"));
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return Unavailable("connect " + ip + ":" + port_s + ": " + std::strerror(err));
    }
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

StatusOr<Fd> Listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0) return InvalidArgument("cannot listen on '" + host + "': " + ::gai_strerror(rc));
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  if (fd.get() >= 0) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd.get() < 0 || ::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0 ||
      ::listen(fd.get(), 1024) != 0) {
    const std::string e = Errno("listen on " + host + ":" + port_s);
    ::freeaddrinfo(res);
    return Unavailable(e);
  }
  ::freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                        : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return fd;
}

Status SendAll(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    HT_RETURN_IF_ERROR(PollFor(fd, POLLOUT, deadline, "send"));
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return IoError(Errno("send"));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    HT_RETURN_IF_ERROR(PollFor(fd, POLLIN, deadline, "receive"));
    const ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r == 0) return Unavailable("connection closed by peer");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return IoError(Errno("recv"));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status SendFrame(int fd, const std::string& body, Clock::time_point deadline) {
  const uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  std::string buf(reinterpret_cast<const char*>(&len), 4);
  buf += body;
  return SendAll(fd, buf.data(), buf.size(), deadline);
}

StatusOr<std::string> RecvFrame(int fd, Clock::time_point deadline, size_t max_bytes) {
  uint32_t len = 0;
  HT_RETURN_IF_ERROR(RecvAll(fd, &len, 4, deadline));
  len = ntohl(len);
  if (len > max_bytes) return DataLoss("frame of " + std::to_string(len) + " bytes is too large");
  std::string body(len, '\0');
  HT_RETURN_IF_ERROR(RecvAll(fd, body.data(), len, deadline));
  return body;
}

std::string EncodeMessage(uint8_t tag, const std::vector<std::string>& args) {
  std::string out(1, static_cast<char>(tag));
  for (const auto& a : args) {
    const uint32_t len = htonl(static_cast<uint32_t>(a.size()));
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += a;
  }
  return out;
}

StatusOr<std::pair<uint8_t, std::vector<std::string>>> DecodeMessage(const std::string& body) {
  if (body.empty()) return DataLoss("empty message");
  std::pair<uint8_t, std::vector<std::string>> out;
  out.first = static_cast<uint8_t>(body[0]);
  size_t pos = 1;
  while (pos < body.size()) {
    if (body.size() - pos < 4) return DataLoss("truncated message");
    uint32_t len;
    std::memcpy(&len, body.data() + pos, 4);
    len = ntohl(len);
    pos += 4;
    if (body.size() - pos < len) return DataLoss("truncated message argument");
    out.second.emplace_back(body.substr(pos, len));
    pos += len;
  }
  return out;
}

}  // namespace hypertrain::launch::net
