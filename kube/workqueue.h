#pragma once
// Rate-limited, de-duplicating work queue with controller-runtime semantics:
//  - a key waiting in the queue is held once, however often it is added;
//  - a key is never handed to two workers at once: a key added while being
//    processed is queued again only when Done(key) is called;
//  - AddRateLimited(key) delays by a per-key exponential backoff
//    (base * 2^failures, capped) combined with an overall token bucket;
//    Forget(key) resets the key's failures;
//  - AddAfter(key, d) queues the key after d (the earliest pending time wins);
//  - ShutDown() wakes every Get() (which then returns nullopt once empty) and
//    drops further adds; the delay thread is joined in ShutDown/destructor.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "kube/rate_limiter.h"

namespace kube {

// What a queue reports as it works (client-go's workqueue metrics): the
// operator turns these into workqueue_* Prometheus series. Called with the
// queue's lock held: implementations only update counters.
class WorkQueueMetrics {
 public:
  virtual ~WorkQueueMetrics() = default;
  virtual void Added() = 0;                        // a key became queued (duplicates are not counted)
  virtual void Depth(size_t keys) = 0;             // keys ready now, after every change
  virtual void Waited(double seconds) = 0;         // from queued to handed to a worker
  virtual void Worked(double seconds) = 0;         // from handed out to Done
  virtual void Retried() = 0;                      // AddRateLimited
};

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{1000 * 1000};
  double overall_qps = 10;  // client-go's default bucket: 10 qps, burst 100
  int overall_burst = 100;
  WorkQueueMetrics* metrics = nullptr;  // optional; must outlive the queue
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WorkQueue(WorkQueueOptions opts = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks for the next key; nullopt after ShutDown() once no key is queued.
  std::optional<std::string> Get();
  // Like Get() but gives up after `timeout` (nullopt).
  std::optional<std::string> GetFor(Clock::duration timeout);
  void Done(const std::string& key);

  void ShutDown();
  bool ShuttingDown() const;
  size_t Len() const;  // keys ready now (not delayed, not processing)

 private:
  void DelayLoop();
  std::optional<std::string> PopLocked();
  // A key became dirty: counted, its queued time kept; into the ready queue
  // unless a worker holds it (Done queues it then).
  void MarkDirtyLocked(const std::string& key);
  void PushLocked(const std::string& key);
  Clock::duration BackoffFor(const std::string& key);

  WorkQueueOptions opts_;
  TokenBucket bucket_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable delay_cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;
  std::set<std::string> processing_;
  std::map<std::string, Clock::time_point> waiting_;  // key → ready time
  std::map<std::string, int> failures_;
  std::map<std::string, Clock::time_point> queued_at_, started_at_;  // for metrics
  bool shutting_down_ = false;
  std::thread delay_thread_;
  Clock::time_point bucket_next_;  // overall limiter: next free slot
};

}  // namespace kube
