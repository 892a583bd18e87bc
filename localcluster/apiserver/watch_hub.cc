#include "localcluster/apiserver/watch_hub.h"

#include <algorithm>

namespace kubelocal {
namespace {
// A consumer this far behind is cut off; it re-watches and catches up.
constexpr size_t kMaxQueued = 200000;
}  // namespace

Status TooOldResourceVersion(uint64_t requested, uint64_t oldest) {
  return Expired("too old resource version: " + std::to_string(requested) + " (" +
                 std::to_string(oldest) + ")");
}

Watcher::Next Watcher::Wait(WatchEvent* out, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_until(l, deadline, [&] { return !queue_.empty() || closed_; });
  if (!queue_.empty()) {
    *out = std::move(queue_.front());
    queue_.pop_front();
    return Next::kEvent;
  }
  return closed_ ? Next::kClosed : Next::kTimeout;
}

void Watcher::Close(bool discard_pending) {
  std::lock_guard<std::mutex> l(mu_);
  if (discard_pending) queue_.clear();
  closed_ = true;
  cv_.notify_all();
}

bool Watcher::closed() const {
  std::lock_guard<std::mutex> l(mu_);
  return closed_;
}

bool Watcher::HasPending() const {
  std::lock_guard<std::mutex> l(mu_);
  return !queue_.empty();
}

void Watcher::Push(WatchEvent e) {
  std::lock_guard<std::mutex> l(mu_);
  PushLocked(std::move(e));
}

void Watcher::PushLocked(WatchEvent e) {
  if (closed_) return;
  if (queue_.size() >= kMaxQueued) {
    closed_ = true;
  } else {
    queue_.push_back(std::move(e));
  }
  cv_.notify_all();
}

std::optional<uint64_t> Watcher::BookmarkRV() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!queue_.empty()) return std::nullopt;
  return seen_rv_;
}

void Watcher::SetSeenRV(uint64_t rv) {
  std::lock_guard<std::mutex> l(mu_);
  seen_rv_ = std::max(seen_rv_, rv);
}

void Watcher::Offer(const WatchEvent& e) {
  std::optional<WatchEvent> out;
  if (e.resource == resource_ && (ns_.empty() || e.ns == ns_)) {
    WatchEvent x = e;
    x.prev = nullptr;
    bool keep = true;
    if (e.type == "MODIFIED") {
      bool now = pred_(e.object);
      bool before = !e.prev.is_null() && pred_(e.prev);
      keep = now || before;
      if (now && !before) x.type = "ADDED";
      if (!now && before) {
        // As kube-apiserver: the object as it was (it matched), at this event's version.
        x.type = "DELETED";
        x.object = e.prev;
        x.object["metadata"]["resourceVersion"] = e.object["metadata"].value("resourceVersion", "");
      }
    } else {
      keep = pred_(e.object);
    }
    if (keep) out = std::move(x);
  }
  // Seen-RV and queue change together so a bookmark never overtakes an event.
  std::lock_guard<std::mutex> l(mu_);
  seen_rv_ = std::max(seen_rv_, e.rv);
  if (out) PushLocked(std::move(*out));
}

void WatchHub::ResetHistory(uint64_t rv) {
  std::lock_guard<std::mutex> l(mu_);
  history_.clear();
  compacted_rv_ = rv;
  last_rv_ = rv;
}

void WatchHub::Publish(const WatchEvent& e) {
  std::lock_guard<std::mutex> l(mu_);
  history_.push_back(e);
  last_rv_ = e.rv;
  while (history_.size() > history_limit_) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
  for (auto& w : watchers_) w->Offer(e);
  Prune();
}

StatusOr<std::shared_ptr<Watcher>> WatchHub::Subscribe(const std::string& resource,
                                                       const std::string& ns,
                                                       std::optional<uint64_t> from_rv,
                                                       ObjectPredicate pred,
                                                       const std::vector<WatchEvent>& initial) {
  std::lock_guard<std::mutex> l(mu_);
  if (from_rv && *from_rv < compacted_rv_) {
    return TooOldResourceVersion(*from_rv, compacted_rv_ + 1);
  }
  auto w = std::make_shared<Watcher>(resource, ns, std::move(pred));
  for (const auto& e : initial) w->Push(e);
  w->initial_count_ = initial.size();
  w->start_rv_ = from_rv ? *from_rv : last_rv_;
  w->SetSeenRV(w->start_rv_);
  if (from_rv) {
    for (const auto& e : history_) {
      if (e.rv > *from_rv) w->Offer(e);
    }
  }
  Prune();
  watchers_.push_back(w);
  return w;
}

void WatchHub::Compact(uint64_t rv) {
  std::lock_guard<std::mutex> l(mu_);
  while (!history_.empty() && history_.front().rv <= rv) history_.pop_front();
  compacted_rv_ = std::max(compacted_rv_, rv);
}

void WatchHub::DropAll() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& w : watchers_) w->Close(/*discard_pending=*/true);
  watchers_.clear();
}

void WatchHub::ExpireAll(bool error_event) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& w : watchers_) {
    std::lock_guard<std::mutex> wl(w->mu_);
    w->queue_.clear();
    if (error_event) {
      WatchEvent e;
      e.type = "ERROR";
      e.object = ToStatusJson(TooOldResourceVersion(0, compacted_rv_ + 1));
      e.object["message"] = "too old resource version (history compacted by the test harness)";
      w->PushLocked(std::move(e));
    }
    w->closed_ = true;
    w->cv_.notify_all();
  }
  watchers_.clear();
}

uint64_t WatchHub::compacted_rv() const {
  std::lock_guard<std::mutex> l(mu_);
  return compacted_rv_;
}

size_t WatchHub::watcher_count() const {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  for (const auto& w : watchers_) n += !w->closed();
  return n;
}

void WatchHub::Prune() {
  watchers_.erase(std::remove_if(watchers_.begin(), watchers_.end(),
                                 [](const std::shared_ptr<Watcher>& w) { return w->closed(); }),
                  watchers_.end());
}

}  // namespace kubelocal
