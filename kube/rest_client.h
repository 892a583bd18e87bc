#pragma once
// RestClient: authenticated, rate-limited, retrying HTTP transport to the API server.
//
// Contract:
//  - Every request carries a timeout (Config::request_timeout unless overridden).
//  - Client-side QPS/burst token bucket before each attempt (Config::qps/burst).
//  - Retries (at most Config::max_retries) with exponential backoff + jitter:
//      429 and 503 for every verb; other 5xx, timeouts and connection errors for
//      GET/HEAD/PUT/PATCH/DELETE; for POST only when the connection was refused
//      (nothing was sent). Retry-After (header or Status.details) is honoured.
//  - 401 → Credentials::OnUnauthorized() and one immediate retry (exec plugins re-run).
//  - Non-2xx responses map to a Status (kube/status.h) from the Status body.
//  - Logging (spdlog): every attempt at debug (method, URL, status, the
//    Authorization header redacted), every retry at warn (error, attempt, delay).
//    Tokens never appear in errors or logs.
//  - TLS: Config::ca_pem replaces the trust store; the host name is verified;
//    client certificate/key are presented when configured.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/cancel.h"
#include "kube/config.h"
#include "kube/status.h"

namespace kube {

struct Request {
  std::string method = "GET";
  std::string path;  // absolute path, e.g. "/api/v1/namespaces/default/pods"
  std::vector<std::pair<std::string, std::string>> query;  // values are URL-encoded by the client
  std::optional<std::string> body;
  std::string content_type = "application/json";
  std::chrono::milliseconds timeout{0};  // 0 → Config::request_timeout
};

struct Response {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

// One attempt as the metrics see it (client-go's rest_client_requests_total
// and rest_client_request_duration_seconds).
struct RequestRecord {
  std::string method;
  int code = 0;          // HTTP status; 0 when no response came (connection error, timeout)
  double seconds = 0;    // until the response headers (a watch: until it opened)
};
using RequestObserver = std::function<void(const RequestRecord&)>;

class RestClient {
 public:
  // Validates the TLS material (clear kConfig error for a bad PEM).
  static StatusOr<std::shared_ptr<RestClient>> Create(Config config);
  ~RestClient();

  // Sends with limiting and retries. 2xx → Response, else the mapped Status.
  StatusOr<Response> Send(const Request& req, CancelToken* cancel = nullptr);
  // Send + parse the body as JSON.
  StatusOr<Json> SendJson(const Request& req, CancelToken* cancel = nullptr);

  // Opens a streaming GET (watch). `on_data` receives body bytes as they
  // arrive (one call per received piece); returning false closes the stream.
  // Returns OK when the server ended the stream normally, kCancelled when
  // `cancel` fired, or the error (non-200 status → Status from the response). The
  // initial request is retried like a GET; a broken stream is not (the caller re-watches).
  Status Stream(const Request& req, const std::function<bool(std::string_view)>& on_data,
                CancelToken* cancel = nullptr);

  const Config& config() const;

  // Called after every attempt (retries included; not for a request the
  // caller cancelled before any response). Must be cheap and thread-safe.
  void SetRequestObserver(RequestObserver observer);

  // Counters for tests and metrics.
  int64_t attempts() const;
  int64_t retries() const;
  int exec_runs() const;

 private:
  struct Impl;
  explicit RestClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Replaces bearer tokens in `s` ("Bearer xyz" → "Bearer <redacted>").
std::string RedactSecrets(std::string s);

}  // namespace kube
