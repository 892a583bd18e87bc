#pragma once
// Small POSIX socket helpers shared by the TCP store: every call is bounded by
// a deadline (no call blocks forever), errors come back as Status.
#include <chrono>
#include <string>
#include <vector>

#include "core/fd.h"
#include "core/status.h"

namespace hypertrain::launch::net {

using Clock = std::chrono::steady_clock;

// Numeric addresses for host (IPv4 and IPv6), via getaddrinfo.
StatusOr<std::vector<std::string>> ResolveHost(const std::string& host);

// Connects to a numeric address within `timeout`.
StatusOr<Fd> ConnectNumeric(const std::string& ip, int port, std::chrono::milliseconds timeout);

// Listens on host:port (port 0 = any free port); returns the fd and the port.
StatusOr<Fd> Listen(const std::string& host, int port, int* bound_port);

Status SendAll(int fd, const void* data, size_t n, Clock::time_point deadline);
Status RecvAll(int fd, void* data, size_t n, Clock::time_point deadline);

// Frames: u32 big-endian length, then the body.
Status SendFrame(int fd, const std::string& body, Clock::time_point deadline);
StatusOr<std::string> RecvFrame(int fd, Clock::time_point deadline, size_t max_bytes = 1 << 30);

// Body codec: u8 tag, then length-prefixed strings.
std::string EncodeMessage(uint8_t tag, const std::vector<std::string>& args);
StatusOr<std::pair<uint8_t, std::vector<std::string>>> DecodeMessage(const std::string& body);

}  // namespace hypertrain::launch::net
