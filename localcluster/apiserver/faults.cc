#include "localcluster/apiserver/faults.h"

#include <chrono>
#include <thread>

namespace kubelocal {

Status FaultInjector::FailNext(int count, int code, int retry_after_seconds) {
  if (count < 0) return BadRequest("count must be >= 0");
  if (code != 429 && code != 500 && code != 503 && code != 504) {
    return BadRequest("code must be one of 429, 500, 503, 504");
  }
  std::lock_guard<std::mutex> l(mu_);
  fail_count_ = count;
  fail_code_ = code;
  retry_after_ = retry_after_seconds < 0 ? 0 : retry_after_seconds;
  return Status();
}

void FaultInjector::SetLatencyMs(int ms) {
  std::lock_guard<std::mutex> l(mu_);
  latency_ms_ = ms < 0 ? 0 : ms;
}

void FaultInjector::ExpireNextWatches(int count) {
  std::lock_guard<std::mutex> l(mu_);
  expire_watches_ = count < 0 ? 0 : count;
}

void FaultInjector::SetWatchExpiryStyle(ExpiryStyle style) {
  std::lock_guard<std::mutex> l(mu_);
  expiry_style_ = style;
}

FaultInjector::ExpiryStyle FaultInjector::watch_expiry_style() const {
  std::lock_guard<std::mutex> l(mu_);
  return expiry_style_;
}

void FaultInjector::SetWatchChunkSeed(uint64_t seed) {
  std::lock_guard<std::mutex> l(mu_);
  chunk_seed_ = seed;
}

uint64_t FaultInjector::watch_chunk_seed() const {
  std::lock_guard<std::mutex> l(mu_);
  return chunk_seed_;
}

void FaultInjector::SetWatchesStalled(bool stalled) {
  std::lock_guard<std::mutex> l(mu_);
  stalled_ = stalled;
}

bool FaultInjector::watches_stalled() const {
  std::lock_guard<std::mutex> l(mu_);
  return stalled_;
}

void FaultInjector::Reset() {
  std::lock_guard<std::mutex> l(mu_);
  fail_count_ = 0;
  latency_ms_ = 0;
  expire_watches_ = 0;
  expiry_style_ = ExpiryStyle::kErrorEvent;
  chunk_seed_ = 0;
  stalled_ = false;
}

Status FaultInjector::OnRequest(const std::string& path) {
  if (path.rfind("/_local/", 0) == 0) return Status();
  int latency;
  Status err;
  {
    std::lock_guard<std::mutex> l(mu_);
    latency = latency_ms_;
    if (fail_count_ > 0) {
      --fail_count_;
      if (fail_code_ == 429) {
        err = TooManyRequests("Too many requests, please try again later.", retry_after_);
      } else if (fail_code_ == 503) {
        err = MakeApiError(503, "ServiceUnavailable",
                           "the server is currently unable to handle the request (injected fault)",
                           retry_after_);
      } else if (fail_code_ == 504) {
        err = MakeApiError(
            504, "Timeout",
            "the server was unable to return a response in the time allotted (injected fault)");
      } else {
        err = InternalError("injected fault");
      }
    }
  }
  if (latency > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency));
  return err;
}

bool FaultInjector::TakeWatchExpiry() {
  std::lock_guard<std::mutex> l(mu_);
  if (expire_watches_ <= 0) return false;
  --expire_watches_;
  return true;
}

json FaultInjector::State() const {
  std::lock_guard<std::mutex> l(mu_);
  return {{"failNext", fail_count_},
          {"failCode", fail_code_},
          {"retryAfterSeconds", retry_after_},
          {"latencyMs", latency_ms_},
          {"expireNextWatches", expire_watches_},
          {"watchExpiry", expiry_style_ == ExpiryStyle::kHttp410 ? "http" : "event"},
          {"watchChunkSeed", chunk_seed_},
          {"watchesStalled", stalled_}};
}

}  // namespace kubelocal
