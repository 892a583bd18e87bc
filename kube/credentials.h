#pragma once
// Bearer-token source for requests: static token, token file (re-read when it
// changes, for rotated service-account tokens) or exec plugin (cached until
// its expirationTimestamp, re-run after a 401). Thread-safe.
#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kube/config.h"
#include "kube/status.h"

namespace kube {

class Credentials {
 public:
  explicit Credentials(const Config& config);

  // "Bearer <token>", or "" when the config has no token source.
  StatusOr<std::string> AuthorizationHeader();
  // A request got 401: drop cached tokens. True if a fresh credential may
  // differ (exec plugin or token file), i.e. one retry is worthwhile.
  bool OnUnauthorized();
  // Number of exec plugin runs so far (tests and metrics).
  int exec_runs() const { return exec_runs_.load(); }

 private:
  StatusOr<std::string> FileToken();
  StatusOr<std::string> ExecToken();

  const std::string server_;
  const std::string static_token_;
  const std::string token_file_;
  const std::optional<ExecConfig> exec_;
  std::mutex mu_;
  // token file cache
  std::string file_token_;
  std::timespec file_mtime_{};
  off_t file_size_ = -1;
  std::chrono::steady_clock::time_point file_checked_{};
  // exec cache
  std::string exec_token_;
  std::optional<std::chrono::system_clock::time_point> exec_expiry_;
  std::atomic<int> exec_runs_{0};
};

}  // namespace kube
