#include "runtime/parallel/watchdog.h"

#include <unistd.h>

#include <cstdio>

#include <spdlog/spdlog.h>

namespace hypertrain::parallel {

CollectiveWatchdog::CollectiveWatchdog(std::chrono::milliseconds timeout, int rank,
                                       int hang_exit_code, HangHandler on_hang)
    : timeout_(timeout), rank_(rank), hang_exit_code_(hang_exit_code), on_hang_(std::move(on_hang)) {
  thread_ = std::thread([this] { Loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t CollectiveWatchdog::Begin(std::string what, DoneProbe done_probe) {
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t id = next_id_++;
  entries_[id] = {std::move(what), std::chrono::steady_clock::now(), step_.load(),
                  std::move(done_probe)};
  return id;
}

void CollectiveWatchdog::End(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  entries_.erase(id);
}

int CollectiveWatchdog::in_flight() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(entries_.size());
}

void CollectiveWatchdog::Loop() {
  // Check often enough that a hang is reported within ~1.25 x timeout.
  const auto period = std::max(std::chrono::milliseconds(10),
                               std::min(std::chrono::milliseconds(1000), timeout_ / 4));
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, period, [&] { return stop_; });
    if (stop_ || fired_) continue;
    const auto now = std::chrono::steady_clock::now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.probe && it->second.probe()) {
        it = entries_.erase(it);
        continue;
      }
      ++it;
    }
    for (const auto& [id, e] : entries_) {
      if (now - e.start < timeout_) continue;
      char buf[160];
      std::snprintf(buf, sizeof(buf), " did not finish within %.1fs (collective_timeout) on rank %d at step %lld",
                    timeout_.count() / 1000.0, rank_, static_cast<long long>(e.step));
      const std::string report = "collective watchdog: " + e.what + buf;
      fired_ = true;
      HangHandler handler = on_hang_;
      l.unlock();
      if (handler) {
        handler(report);
      } else {
        spdlog::critical("{}; exiting with code {}", report, hang_exit_code_);
        spdlog::default_logger()->flush();
        ::_exit(hang_exit_code_);
      }
      l.lock();
      break;
    }
  }
}

}  // namespace hypertrain::parallel
