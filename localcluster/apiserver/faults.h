// Fault injection for tests: the next N requests fail with a chosen code
// (429 with Retry-After, 500, 503), added latency, and forced 410s for the
// next N watch requests. Admin paths (/_local/...) are never affected.
#pragma once

#include <mutex>
#include <string>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

class FaultInjector {
 public:
  // Next `count` requests answer `code` (429, 500 or 503).
  Status FailNext(int count, int code, int retry_after_seconds);
  void SetLatencyMs(int ms);
  // The next `count` watch requests get an ERROR 410 event and close.
  void ExpireNextWatches(int count);
  void Reset();

  // Per request: sleeps for the latency, then maybe returns an error.
  Status OnRequest(const std::string& path);
  // Per watch request: true if it must be answered with 410.
  bool TakeWatchExpiry();
  json State() const;

 private:
  mutable std::mutex mu_;
  int fail_count_ = 0;
  int fail_code_ = 500;
  int retry_after_ = 1;
  int latency_ms_ = 0;
  int expire_watches_ = 0;
};

}  // namespace kubelocal
