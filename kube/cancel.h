#pragma once
// Cooperative cancellation shared by requests, watches, informers and queues.
// Cancel() is idempotent, wakes SleepFor() at once and runs registered callbacks
// (e.g. closing an open watch connection) exactly once.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace kube {

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void Cancel();
  bool cancelled() const;
  // Sleeps up to `d`; returns false (early) if cancelled.
  bool SleepFor(std::chrono::steady_clock::duration d) const;
  // Runs `fn` on Cancel() (at once if already cancelled). Returns an id for Unregister.
  int Register(std::function<void()> fn);
  void Unregister(int id);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool cancelled_ = false;
  int next_id_ = 1;
  std::map<int, std::function<void()>> callbacks_;
};

// RAII registration.
class CancelRegistration {
 public:
  CancelRegistration(CancelToken* t, std::function<void()> fn)
      : t_(t), id_(t ? t->Register(std::move(fn)) : 0) {}
  ~CancelRegistration() {
    if (t_) t_->Unregister(id_);
  }
  CancelRegistration(const CancelRegistration&) = delete;
  CancelRegistration& operator=(const CancelRegistration&) = delete;

 private:
  CancelToken* t_;
  int id_;
};

}  // namespace kube
