#pragma once
// Reflector: keeps a Store in step with the API server by LIST (paged) then
// WATCH from the list's resourceVersion, following the API conventions:
//  - re-watch from the last seen resourceVersion (events and BOOKMARKs) after
//    the server closes a watch normally or the connection drops;
//  - on 410 Expired (HTTP 410, or an ERROR event with code 410 inside a 200
//    stream) re-LIST and diff against the store: objects gone from the new
//    list become deletions, changed ones updates, unseen ones additions;
//  - an event repeating the stored resourceVersion is not re-delivered, so no
//    duplicates reach handlers after a re-watch or a re-list;
//  - other failures back off exponentially (with jitter) and retry, each one
//    logged (spdlog warn, naming the resource, namespace and delay); Run()
//    returns only when the cancel token fires (promptly: open watches are closed).
// Resource versions are compared for equality only.
//
// A `transform` (controller-runtime's cache TransformFunc) trims each object
// before it is stored: list pages one at a time and every watch event, so the
// cache holds only the fields its readers use and a whole LIST is never held
// untrimmed. It must keep metadata.name, namespace, uid and resourceVersion.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "kube/cancel.h"
#include "kube/resources.h"
#include "kube/store.h"

namespace kube {

// Trims an object in place before the store keeps it.
using TransformFunc = std::function<void(Json&)>;

// Removes metadata.managedFields (server-side apply bookkeeping no controller reads).
void StripManagedFields(Json& obj);

struct ReflectorOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_max{10000};
  TransformFunc transform = StripManagedFields;  // null: objects stored as received
};

struct ReflectorStats {
  int64_t lists = 0;    // completed LISTs (all pages)
  int64_t watches = 0;  // watch requests opened
  int64_t relists_after_gone = 0;
  int64_t errors = 0;  // failed list/watch attempts
  int64_t events = 0;  // watch events received (incl. bookmarks)
  int64_t bookmarks = 0;
};

class Reflector {
 public:
  using DeltaSink = std::function<void(const StoreDelta&)>;
  Reflector(ResourceClient client, Store* store, DeltaSink sink, ReflectorOptions opts = {});

  // Blocks until `cancel` fires.
  void Run(CancelToken* cancel);

  bool HasSynced() const { return synced_.load(); }
  std::string LastResourceVersion() const;
  ReflectorStats stats() const;

 private:
  Status ListAndReplace(CancelToken* cancel);
  // Returns OK on a normal close, kGone when a re-list is needed.
  Status WatchOnce(CancelToken* cancel);
  void SetRv(const std::string& rv);
  // "pods in namespace ns" / "nodes".
  std::string What() const;

  ResourceClient client_;
  Store* store_;
  DeltaSink sink_;
  ReflectorOptions opts_;
  std::atomic<bool> synced_{false};
  mutable std::mutex mu_;
  std::string rv_;
  ReflectorStats stats_;
};

}  // namespace kube
