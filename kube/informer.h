#pragma once
// Informer: a Reflector on its own thread, a Store, and event handlers.
//
// Handlers run on the informer thread, serially, in event order; keep them
// short (enqueue a key into a WorkQueue and return). A handler registered
// after Start() is first given an on_add for every cached object.
// Stop() cancels the watch (closing its connection) and joins: no hang.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kube/cancel.h"
#include "kube/reflector.h"
#include "kube/resources.h"
#include "kube/store.h"
#include "kube/workqueue.h"

namespace kube {

struct EventHandlers {
  std::function<void(const Json& obj)> on_add;
  std::function<void(const Json& old_obj, const Json& new_obj)> on_update;
  std::function<void(const Json& last_known)> on_delete;
};

// Handlers that enqueue the object's store key ("ns/name").
EventHandlers EnqueueKeyHandlers(WorkQueue* queue);
// Handlers that enqueue "ns/<owner name>" for each ownerReference of `owner_kind`
// (e.g. pods → their training job).
EventHandlers EnqueueOwnerHandlers(WorkQueue* queue, std::string owner_kind);

class Informer {
 public:
  explicit Informer(ResourceClient client, ReflectorOptions opts = {});
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddEventHandlers(EventHandlers h);
  Store& store() { return store_; }
  const Store& store() const { return store_; }

  void Start();
  void Stop();
  // True once the first LIST has been applied; false on timeout.
  bool WaitForSync(std::chrono::milliseconds timeout);
  bool HasSynced() const { return reflector_.HasSynced(); }
  // List/watch failures are logged with spdlog (warn: what was listed or
  // watched, the error, the retry delay) and counted here.
  ReflectorStats stats() const { return reflector_.stats(); }
  std::string LastResourceVersion() const { return reflector_.LastResourceVersion(); }

 private:
  void Dispatch(const StoreDelta& d);
  Store store_;
  Reflector reflector_;
  CancelToken cancel_;
  std::mutex mu_;  // guards handlers_ and dispatch (so late registration sees a consistent store)
  std::vector<EventHandlers> handlers_;
  std::thread thread_;
  bool started_ = false;
};

}  // namespace kube
