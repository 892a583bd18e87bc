// Fault injection for tests: the next N requests fail with a chosen code
// (429 with Retry-After, 500, 503), added latency, forced 410s for the next N
// watch requests and the shape of a 410 (an ERROR event or an HTTP status),
// watch streams cut into random chunks, and stalled watch streams. Admin
// paths (/_local/...) are never affected.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

class FaultInjector {
 public:
  // Next `count` requests answer `code` (429, 500 or 503).
  Status FailNext(int count, int code, int retry_after_seconds);
  void SetLatencyMs(int ms);
  // The next `count` watch requests are told 410 Expired.
  void ExpireNextWatches(int count);
  // How a watch learns that its start point expired: an ERROR event in a 200
  // stream (kube-apiserver's watch cache does this) or an HTTP 410 response
  // (an open stream then just ends). Both reach clients in practice.
  enum class ExpiryStyle { kErrorEvent, kHttp410 };
  void SetWatchExpiryStyle(ExpiryStyle style);
  ExpiryStyle watch_expiry_style() const;
  // Non-zero: watch streams are cut at pseudo-random points from this seed (an
  // event split over chunks, several events in one), as proxies may deliver them.
  void SetWatchChunkSeed(uint64_t seed);
  uint64_t watch_chunk_seed() const;
  // While stalled, open and new watch streams send nothing (no events, no
  // bookmarks): a watch cut off from the server without noticing.
  void SetWatchesStalled(bool stalled);
  bool watches_stalled() const;
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
  ExpiryStyle expiry_style_ = ExpiryStyle::kErrorEvent;
  uint64_t chunk_seed_ = 0;
  bool stalled_ = false;
};

}  // namespace kubelocal
