// Background garbage collector: owner-reference cascading deletion
// (background and foreground), and namespace termination.
//
// - A dependent none of whose owners exists any more is deleted (background).
// - An owner being deleted in the foreground (finalizer "foregroundDeletion")
//   gets its dependents deleted; once none is left the finalizer is removed.
// - A namespace with a deletionTimestamp gets its contents deleted; once empty
//   its "kubernetes" finalizer is dropped and it disappears.
// Runs when kicked (any deletion) and every `period` as a safety net.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "localcluster/apiserver/object_ops.h"

namespace kubelocal {

class GarbageCollector {
 public:
  GarbageCollector(ObjectOps* ops, std::chrono::milliseconds period);
  ~GarbageCollector();
  void Start();
  void Stop();
  void Kick();
  // One full pass (also used by tests); returns the number of actions taken.
  int RunOnce();

 private:
  void Loop();
  ObjectOps* ops_;
  const std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool kicked_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kubelocal
