#include "kube/rate_limiter.h"

#include <algorithm>
#include <thread>

namespace kube {

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)), last_(Clock::now()) {}

void TokenBucket::RefillLocked(Clock::time_point now) {
  double dt = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + dt * qps_);
}

bool TokenBucket::TryAcquire() {
  if (qps_ <= 0) return true;
  std::lock_guard<std::mutex> l(mu_);
  RefillLocked(Clock::now());
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  return false;
}

TokenBucket::Clock::duration TokenBucket::EstimatedWait() {
  if (qps_ <= 0) return Clock::duration::zero();
  std::lock_guard<std::mutex> l(mu_);
  RefillLocked(Clock::now());
  if (tokens_ >= 1.0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>((1.0 - tokens_) / qps_));
}

bool TokenBucket::Acquire(const std::atomic<bool>* cancelled, Clock::time_point deadline) {
  while (true) {
    if (TryAcquire()) return true;
    if (cancelled && cancelled->load()) return false;
    auto wait = std::min<Clock::duration>(EstimatedWait(), std::chrono::milliseconds(50));
    if (Clock::now() + wait > deadline) return false;
    std::this_thread::sleep_for(std::max<Clock::duration>(wait, std::chrono::microseconds(100)));
  }
}

Backoff::Backoff(std::chrono::milliseconds base, std::chrono::milliseconds max, uint64_t seed)
    : base_(base), max_(max), rng_(seed ? seed : std::random_device{}()) {}

std::chrono::milliseconds Backoff::Delay(int attempt) {
  double d = static_cast<double>(base_.count());
  for (int i = 0; i < attempt && d < max_.count(); ++i) d *= 2;
  d = std::min(d, static_cast<double>(max_.count()));
  std::lock_guard<std::mutex> l(mu_);
  std::uniform_real_distribution<double> u(0.5, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(d * u(rng_)));
}

}  // namespace kube
