#include "kube/cancel.h"

#include <vector>

namespace kube {

void CancelToken::Cancel() {
  std::map<int, std::function<void()>> cbs;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    cbs.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& [id, fn] : cbs) fn();
}

bool CancelToken::cancelled() const {
  std::lock_guard<std::mutex> l(mu_);
  return cancelled_;
}

bool CancelToken::SleepFor(std::chrono::steady_clock::duration d) const {
  std::unique_lock<std::mutex> l(mu_);
  return !cv_.wait_for(l, d, [this] { return cancelled_; });
}

int CancelToken::Register(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!cancelled_) {
      int id = next_id_++;
      callbacks_[id] = std::move(fn);
      return id;
    }
  }
  fn();
  return 0;
}

void CancelToken::Unregister(int id) {
  std::lock_guard<std::mutex> l(mu_);
  callbacks_.erase(id);
}

}  // namespace kube
