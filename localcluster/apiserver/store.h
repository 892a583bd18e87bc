// The object store: every object of every resource, a global monotonic
// resourceVersion, atomic read-modify-write, paged lists and watches.
//
// Objects are JSON; the store stamps metadata.resourceVersion on every write
// and knows nothing else about Kubernetes semantics (the API layer does). With
// a data dir every write is logged durably before it becomes visible.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"
#include "localcluster/apiserver/persistence.h"
#include "localcluster/apiserver/watch_hub.h"

namespace kubelocal {

struct StoreOptions {
  std::string data_dir;  // empty: in memory only
  size_t history_limit = 10000;
  size_t snapshot_every = 2000;  // WAL records between snapshots
};

// What a Mutate callback wants done.
struct Mutation {
  enum class Kind { kNone, kPut, kDelete };
  Kind kind = Kind::kNone;
  json object;  // for kPut: the new object (resourceVersion is stamped by the store)
  static Mutation None() { return {}; }
  static Mutation Put(json o) { return {Kind::kPut, std::move(o)}; }
  static Mutation Delete() { return {Kind::kDelete, nullptr}; }
};

struct ListPage {
  std::vector<json> items;
  uint64_t resource_version = 0;
  std::string continue_token;
  int64_t remaining = -1;  // -1: unknown / not paged
};

class Store {
 public:
  static StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  uint64_t CurrentRV() const;
  std::optional<json> Get(const std::string& resource, const std::string& ns,
                          const std::string& name) const;

  // Lists `resource` (one namespace or all when ns is empty) filtered by `pred`,
  // ordered by namespace/name. `limit` 0 = no limit.
  StatusOr<ListPage> List(const std::string& resource, const std::string& ns,
                          const ObjectPredicate& pred, int64_t limit,
                          const std::string& continue_token) const;

  // Atomic read-modify-write of one object. `fn` sees the current object (or
  // nullopt) and returns what to do or an error. Returns the stored object for
  // a put, the last state for a delete, the current object (or null) for none.
  using MutateFn = std::function<StatusOr<Mutation>(const std::optional<json>& current)>;
  StatusOr<json> Mutate(const std::string& resource, const std::string& ns, const std::string& name,
                        const MutateFn& fn);

  // Copy of all objects of `resource` ("" = every resource) as (resource, object).
  std::vector<std::pair<std::string, json>> Snapshot(const std::string& resource = "") const;

  // Starts a watch. from_rv unset: synthetic ADDED events for the current state
  // first. 410 when from_rv is older than the history.
  StatusOr<std::shared_ptr<Watcher>> Watch(const std::string& resource, const std::string& ns,
                                           std::optional<uint64_t> from_rv, ObjectPredicate pred);

  // Forgets all history up to now.
  void CompactHistory();
  WatchHub& hub() { return hub_; }

 private:
  explicit Store(const StoreOptions& o) : options_(o), hub_(o.history_limit) {}
  static std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

  const StoreOptions options_;
  mutable std::mutex mu_;
  uint64_t rv_ = 1;
  StateMap objects_;
  std::unique_ptr<Persistence> persistence_;
  size_t wal_records_ = 0;
  WatchHub hub_;
};

// Continue tokens: opaque base64url of {"rv":..,"start":..}.
std::string EncodeContinue(uint64_t rv, const std::string& last_key);
bool DecodeContinue(const std::string& token, uint64_t* rv, std::string* last_key);

}  // namespace kubelocal
