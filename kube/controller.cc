#include "kube/controller.h"

namespace kube {

Controller::Controller(WorkQueue* queue, Reconciler reconcile, int workers,
                       std::function<void(const std::string&, const Status&)> on_error)
    : queue_(queue),
      reconcile_(std::move(reconcile)),
      workers_(std::max(1, workers)),
      on_error_(std::move(on_error)) {}

Controller::~Controller() { Stop(); }

void Controller::Start() {
  if (!threads_.empty()) return;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
}

void Controller::Stop() {
  queue_->ShutDown();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Controller::Work() {
  while (auto key = queue_->Get()) {
    StatusOr<ReconcileResult> r = hypertrain::Unknown("reconciler threw");
    try {
      r = reconcile_(*key);
    } catch (const std::exception& e) {
      r = hypertrain::Unknown(std::string("reconciler threw: ") + e.what());
    }
    if (!r.ok()) {
      if (on_error_) on_error_(*key, r.status());
      queue_->AddRateLimited(*key);
    } else if (r->requeue_after.count() > 0) {
      queue_->Forget(*key);
      queue_->AddAfter(*key, r->requeue_after);
    } else if (r->requeue) {
      queue_->AddRateLimited(*key);
    } else {
      queue_->Forget(*key);
    }
    queue_->Done(*key);
  }
}

}  // namespace kube
