// A process whose static TLS is larger than civetweb's 100 KiB thread stacks
// (as `hypertrain`, which loads cuBLAS and OpenBLAS) still serves HTTP: without
// the stack floor in http_server.cc, glibc refuses every civetweb thread and
// Start fails with "Cannot create first worker thread".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "core/http_server.h"

namespace hypertrain {
namespace {

// 256 KiB of static TLS in this executable, on every thread's stack.
thread_local char t_big[256 * 1024];

std::string Get(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  const std::string req = "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[1024];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(HttpServer, StartsWithALargeStaticTls) {
  std::memset(t_big, 1, sizeof(t_big));  // the TLS block is really used
  HttpServer http;
  http.Handle("/ping", [] { return HttpResponse{200, "text/plain; charset=utf-8", "pong\n"}; });
  const Status s = http.Start("127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string r = Get(http.port());
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("pong"), std::string::npos) << r;
  // Only civetweb's start is affected: a small stack elsewhere is still refused.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 128 * 1024), 0);
  size_t size = 0;
  pthread_attr_getstacksize(&attr, &size);
  EXPECT_EQ(size, 128u * 1024);
  pthread_attr_destroy(&attr);
}

}  // namespace
}  // namespace hypertrain
