#pragma once
// Worker loop over a WorkQueue with controller-runtime's result handling:
//  - reconcile error          → AddRateLimited(key)  (per-key exponential backoff)
//  - requeue_after > 0        → Forget(key) + AddAfter(key, requeue_after)
//  - requeue                  → AddRateLimited(key)
//  - success                  → Forget(key)
// and Done(key) in every case, so a key is never reconciled by two workers at
// once and an event arriving mid-reconcile triggers exactly one more pass.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kube/status.h"
#include "kube/workqueue.h"

namespace kube {

struct ReconcileResult {
  bool requeue = false;
  std::chrono::milliseconds requeue_after{0};
};

using Reconciler = std::function<StatusOr<ReconcileResult>(const std::string& key)>;

class Controller {
 public:
  // `queue` must outlive the controller. `on_error` (optional) sees each failure.
  Controller(WorkQueue* queue, Reconciler reconcile, int workers,
             std::function<void(const std::string& key, const Status&)> on_error = nullptr);
  ~Controller();
  void Start();
  // Shuts the queue down and joins the workers (in-flight reconciles finish).
  void Stop();

 private:
  void Work();
  WorkQueue* queue_;
  Reconciler reconcile_;
  int workers_;
  std::function<void(const std::string&, const Status&)> on_error_;
  std::vector<std::thread> threads_;
};

}  // namespace kube
