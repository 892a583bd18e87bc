// Watch fan-out with a bounded event history.
//
// The store publishes every committed change (in resourceVersion order) to the
// hub. A Watcher receives the events of one resource (optionally one namespace)
// that pass its predicate, translated the way the apiserver does it: a MODIFIED
// object that stops matching becomes DELETED, one that starts matching becomes
// ADDED. The hub keeps the last `history_limit` events so that watches can start
// at an older resourceVersion; anything older than the compaction point gives
// 410 Expired.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  std::string resource;
  std::string ns;
  uint64_t rv = 0;
  json object;
  json prev;  // previous state for MODIFIED (null otherwise)
};

using ObjectPredicate = std::function<bool(const json&)>;

class Watcher {
 public:
  enum class Next { kEvent, kTimeout, kClosed };
  Watcher(std::string resource, std::string ns, ObjectPredicate pred)
      : resource_(std::move(resource)), ns_(std::move(ns)), pred_(std::move(pred)) {}

  // Waits for the next event until `deadline`.
  Next Wait(WatchEvent* out, std::chrono::steady_clock::time_point deadline);
  // Ends the watch: the HTTP stream closes normally once drained, or at once,
  // losing what it has not delivered, with `discard_pending` (a dropped
  // connection, or a consumer cut off by compaction as etcd does it).
  void Close(bool discard_pending = false);
  bool closed() const;
  // Events are queued that the consumer has not taken yet.
  bool HasPending() const;

  // Hub side: filters/translates and queues `e`.
  void Offer(const WatchEvent& e);
  void Push(WatchEvent e);  // unfiltered (initial ADDED, ERROR)
  // The resourceVersion up to which this watcher has seen every event, if its
  // queue is drained (what a BOOKMARK may carry); nullopt while events wait.
  std::optional<uint64_t> BookmarkRV() const;
  void SetSeenRV(uint64_t rv);
  // Synthetic ADDED events queued at subscription, and the revision they show.
  size_t initial_count() const { return initial_count_; }
  uint64_t start_rv() const { return start_rv_; }

 private:
  void PushLocked(WatchEvent e);
  const std::string resource_, ns_;
  const ObjectPredicate pred_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WatchEvent> queue_;
  bool closed_ = false;
  uint64_t seen_rv_ = 0;
  size_t initial_count_ = 0;
  uint64_t start_rv_ = 0;
  friend class WatchHub;
};

class WatchHub {
 public:
  explicit WatchHub(size_t history_limit) : history_limit_(history_limit) {}

  // Events at or before `rv` are unavailable (fresh start or restart).
  void ResetHistory(uint64_t rv);
  // Appends to history and fans out; callers publish in increasing rv order.
  void Publish(const WatchEvent& e);
  // Registers a watcher that first gets `initial` (already filtered), then the
  // history after `from_rv` (if set) and then live events. 410 if `from_rv`
  // is older than the compaction point.
  StatusOr<std::shared_ptr<Watcher>> Subscribe(const std::string& resource, const std::string& ns,
                                               std::optional<uint64_t> from_rv,
                                               ObjectPredicate pred,
                                               const std::vector<WatchEvent>& initial);
  // Drops history up to and including `rv`.
  void Compact(uint64_t rv);
  // Closes every watcher; what they have not delivered is lost.
  void DropAll();
  // Closes every watcher, dropping what it has not delivered, after an ERROR
  // 410 Expired event when `error_event` (else its stream just ends, and the
  // re-watch from the old resourceVersion is refused).
  void ExpireAll(bool error_event = true);
  uint64_t compacted_rv() const;
  size_t watcher_count() const;

 private:
  void Prune();  // drops closed watchers; mu_ held

  const size_t history_limit_;
  mutable std::mutex mu_;
  std::deque<WatchEvent> history_;
  uint64_t compacted_rv_ = 0;
  uint64_t last_rv_ = 0;
  std::vector<std::shared_ptr<Watcher>> watchers_;
};

// The Status object of a 410 for a watch that starts too far back.
Status TooOldResourceVersion(uint64_t requested, uint64_t oldest);

}  // namespace kubelocal
