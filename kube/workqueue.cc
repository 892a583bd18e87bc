#include "kube/workqueue.h"

#include <algorithm>

namespace kube {

WorkQueue::WorkQueue(WorkQueueOptions opts)
    : opts_(opts), bucket_(opts.overall_qps, opts.overall_burst), bucket_next_(Clock::now()) {
  delay_thread_ = std::thread([this] { DelayLoop(); });
}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::MarkDirtyLocked(const std::string& key) {
  dirty_.insert(key);
  if (opts_.metrics) {
    opts_.metrics->Added();
    queued_at_.emplace(key, Clock::now());
  }
  if (processing_.count(key)) return;  // re-queued by Done()
  PushLocked(key);
}

void WorkQueue::PushLocked(const std::string& key) {
  queue_.push_back(key);
  if (opts_.metrics) opts_.metrics->Depth(queue_.size());
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  if (shutting_down_ || dirty_.count(key)) return;
  waiting_.erase(key);  // ready now beats a later delayed add
  MarkDirtyLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::duration delay) {
  if (delay <= Clock::duration::zero()) {
    Add(key);
    return;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (shutting_down_ || dirty_.count(key)) return;  // already queued: sooner than the delay
  auto when = Clock::now() + delay;
  auto it = waiting_.find(key);
  if (it == waiting_.end() || when < it->second) waiting_[key] = when;
  delay_cv_.notify_one();
}

WorkQueue::Clock::duration WorkQueue::BackoffFor(const std::string& key) {
  int n;
  {
    std::lock_guard<std::mutex> l(mu_);
    n = failures_[key]++;
  }
  double d = static_cast<double>(opts_.base_delay.count());
  for (int i = 0; i < n && d < opts_.max_delay.count(); ++i) d *= 2;
  auto per_item = std::chrono::milliseconds(
      static_cast<int64_t>(std::min(d, static_cast<double>(opts_.max_delay.count()))));
  // Overall bucket: reserve the next free slot (like rate.Limiter.Reserve).
  Clock::duration overall = Clock::duration::zero();
  if (opts_.overall_qps > 0 && !bucket_.TryAcquire()) {
    std::lock_guard<std::mutex> l(mu_);
    auto now = Clock::now();
    bucket_next_ =
        std::max(bucket_next_, now) + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(1.0 / opts_.overall_qps));
    overall = bucket_next_ - now;
  }
  return std::max<Clock::duration>(per_item, overall);
}

void WorkQueue::AddRateLimited(const std::string& key) {
  if (opts_.metrics) {
    std::lock_guard<std::mutex> l(mu_);
    if (!shutting_down_) opts_.metrics->Retried();
  }
  AddAfter(key, BackoffFor(key));
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<std::string> WorkQueue::PopLocked() {
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  if (opts_.metrics) {
    const auto now = Clock::now();
    opts_.metrics->Depth(queue_.size());
    if (auto it = queued_at_.find(key); it != queued_at_.end()) {
      opts_.metrics->Waited(std::chrono::duration<double>(now - it->second).count());
      queued_at_.erase(it);
    }
    started_at_[key] = now;
  }
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return !queue_.empty() || shutting_down_; });
  if (queue_.empty()) return std::nullopt;
  return PopLocked();
}

std::optional<std::string> WorkQueue::GetFor(Clock::duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [this] { return !queue_.empty() || shutting_down_; });
  if (queue_.empty()) return std::nullopt;
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  processing_.erase(key);
  if (opts_.metrics) {
    if (auto it = started_at_.find(key); it != started_at_.end()) {
      opts_.metrics->Worked(std::chrono::duration<double>(Clock::now() - it->second).count());
      started_at_.erase(it);
    }
  }
  if (dirty_.count(key)) PushLocked(key);
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    shutting_down_ = true;
    waiting_.clear();
  }
  cv_.notify_all();
  delay_cv_.notify_all();
  if (delay_thread_.joinable() && delay_thread_.get_id() != std::this_thread::get_id())
    delay_thread_.join();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> l(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.size();
}

void WorkQueue::DelayLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!shutting_down_) {
    auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second <= now) {
        const std::string key = it->first;
        it = waiting_.erase(it);
        if (!dirty_.count(key)) MarkDirtyLocked(key);
      } else {
        next = std::min(next, it->second);
        ++it;
      }
    }
    if (next == Clock::time_point::max())
      delay_cv_.wait(l);
    else
      delay_cv_.wait_until(l, next);
  }
}

}  // namespace kube
