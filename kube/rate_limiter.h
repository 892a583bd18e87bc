#pragma once
// Client-side request limiter (token bucket) and retry backoff.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>

namespace kube {

// Token bucket: refills at `qps` tokens per second up to `burst`. qps <= 0
// disables limiting. Thread-safe.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double qps, int burst);

  // Blocks until a token is available; returns false if `cancelled` becomes
  // true (checked every <= 50 ms) or the wait would pass `deadline`.
  bool Acquire(const std::atomic<bool>* cancelled = nullptr,
               Clock::time_point deadline = Clock::time_point::max());
  bool TryAcquire();
  // Time until the next token is available if one were requested now.
  Clock::duration EstimatedWait();

 private:
  void RefillLocked(Clock::time_point now);
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
};

// Exponential backoff with full jitter in [d/2, d]: d = min(max, base * 2^attempt).
class Backoff {
 public:
  Backoff(std::chrono::milliseconds base, std::chrono::milliseconds max, uint64_t seed = 0);
  // Delay before retry number `attempt` (0-based).
  std::chrono::milliseconds Delay(int attempt);

 private:
  std::chrono::milliseconds base_, max_;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace kube
