#pragma once
// Collective watchdog: every collective registers itself while it is in
// flight; a background thread checks them and, when one has not finished
// within `timeout` (config key `collective_timeout`), reports which
// collective, group, rank and training step hung, then runs the hang handler.
// The default handler logs the report (critical) and ends the process at once
// with `hang_exit_code` (contract/exit_codes.h kExitCollectiveTimeout): a rank
// stuck in a collective cannot be unwound safely, and the launcher/operator
// restart the job.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace hypertrain::parallel {

class CollectiveWatchdog {
 public:
  using HangHandler = std::function<void(const std::string& report)>;
  // done_probe, when given, is polled by the watchdog thread (e.g. a CUDA
  // event query) and ends the entry when it returns true.
  using DoneProbe = std::function<bool()>;

  CollectiveWatchdog(std::chrono::milliseconds timeout, int rank, int hang_exit_code,
                     HangHandler on_hang = {});
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // `what` e.g. "all_gather group 'shard0' (gloo, 2 ranks) 1024 x bf16".
  uint64_t Begin(std::string what, DoneProbe done_probe = {});
  void End(uint64_t id);
  // The training step reported with a hang (HSDP sets it to the 1-based
  // optimizer step this process is computing; -1 before the first).
  void SetStep(int64_t step) { step_.store(step); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  int in_flight() const;

 private:
  struct Entry {
    std::string what;
    std::chrono::steady_clock::time_point start;
    int64_t step;
    DoneProbe probe;
  };
  void Loop();

  const std::chrono::milliseconds timeout_;
  const int rank_;
  const int hang_exit_code_;
  HangHandler on_hang_;
  std::atomic<int64_t> step_{-1};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  bool fired_ = false;
  std::thread thread_;
};

// RAII registration of one collective.
class WatchdogScope {
 public:
  WatchdogScope(CollectiveWatchdog* w, std::string what)
      : w_(w), id_(w ? w->Begin(std::move(what)) : 0) {}
  ~WatchdogScope() {
    if (w_) w_->End(id_);
  }
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  CollectiveWatchdog* w_;
  uint64_t id_;
};

}  // namespace hypertrain::parallel
