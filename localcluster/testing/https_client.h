// Test-only HTTPS client (Boost.Beast) for driving kube-local over real TLS:
// one request per connection, optional bearer token / client certificate,
// CA verification with hostname 127.0.0.1, and a streaming reader for watches.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kubelocal::testing {

struct HttpResponse {
  int code = 0;  // 0: connection / TLS failure (see error)
  std::map<std::string, std::string> headers;
  std::string body;
  std::string error;
};

struct ClientConfig {
  int port = 0;
  std::string ca_pem;
  std::string token;
  std::string client_cert_pem, client_key_pem;
  int timeout_seconds = 20;
};

HttpResponse Request(const ClientConfig& c, const std::string& method, const std::string& target,
                     const std::string& body = "",
                     const std::string& content_type = "application/json",
                     const std::map<std::string, std::string>& headers = {});

// Streams a watch: calls on_line for each newline-terminated JSON line until it
// returns false, the server ends the response or `deadline` passes. Returns
// the HTTP status (0 on transport errors). `chunk_sizes`, when given, gets the
// size of every HTTP chunk of a chunked body, in order.
int Stream(const ClientConfig& c, const std::string& target,
           const std::function<bool(const std::string& line)>& on_line,
           std::chrono::steady_clock::time_point deadline, std::string* error = nullptr,
           std::vector<uint64_t>* chunk_sizes = nullptr);

}  // namespace kubelocal::testing
