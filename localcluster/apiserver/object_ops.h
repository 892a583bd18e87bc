// Kubernetes object semantics on top of the Store: create / update / patch /
// delete with metadata rules (uid, creationTimestamp, generateName, generation,
// resourceVersion preconditions), status subresources, finalizers and
// deletionTimestamp, graceful pod deletion, and per-type admission (pods,
// services, namespaces, CRDs, custom resources: admission.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"
#include "localcluster/apiserver/object_meta.h"
#include "localcluster/apiserver/patch.h"
#include "localcluster/apiserver/resources.h"
#include "localcluster/apiserver/store.h"

namespace kubelocal {

struct WriteOptions {
  bool dry_run = false;
  std::string field_validation;  // "", Ignore, Warn, Strict
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string propagation_policy;  // Background (default), Foreground, Orphan
  std::string precondition_uid;
  std::string precondition_rv;
  bool dry_run = false;
  // Parses a DeleteOptions body plus query parameters.
  static StatusOr<DeleteOptions> Parse(const std::string& body,
                                       const std::function<std::string(const std::string&)>& query);
};

class ObjectOps {
 public:
  ObjectOps(Store* store, Registry* registry) : store_(store), registry_(registry) {}

  StatusOr<json> Get(const ResourceType& t, const std::string& ns, const std::string& name) const;
  StatusOr<json> Create(const ResourceType& t, const std::string& ns, json obj,
                        const WriteOptions& opts, std::vector<std::string>* warnings);
  StatusOr<json> Update(const ResourceType& t, const std::string& ns, const std::string& name,
                        json obj, bool status_only, const WriteOptions& opts,
                        std::vector<std::string>* warnings);
  // For apply patches, a missing object is created (server-side apply).
  StatusOr<json> Patch(const ResourceType& t, const std::string& ns, const std::string& name,
                       PatchType type, const std::string& body, bool status_only,
                       const WriteOptions& opts, std::vector<std::string>* warnings);
  struct Deleted {
    json object;
    bool removed = false;  // false: still there (finalizers / graceful)
  };
  StatusOr<Deleted> Delete(const ResourceType& t, const std::string& ns, const std::string& name,
                           const DeleteOptions& opts);

  // Registers the CRDs found in the store (at startup).
  void LoadCrds();
  // Creates default, kube-system, kube-public, kube-node-lease if missing.
  Status EnsureDefaultNamespaces();
  // Called after anything is removed or starts deleting (wakes the GC).
  void SetDeletionHook(std::function<void()> hook) { on_delete_ = std::move(hook); }

  // The stored object as the requested version (apiVersion rewrite only).
  static json ForVersion(const ResourceType& t, json obj);

  Registry* registry() { return registry_; }
  Store* store() { return store_; }

 private:
  Status CheckNamespace(const ResourceType& t, const std::string& ns, const std::string& name);
  // Type-specific defaults and validation of a full object; `old` is null on create.
  Status Admit(const ResourceType& t, json& obj, const json& old, const WriteOptions& opts,
               std::vector<std::string>* warnings);
  // Merges an incoming full object with the current one (status rules,
  // immutable metadata, generation) and decides put / delete / no-op.
  StatusOr<Mutation> FinishUpdate(const ResourceType& t, const json& cur, json next,
                                  bool status_only, const WriteOptions& opts,
                                  std::vector<std::string>* warnings);
  void AfterWrite(const ResourceType& t, const json& obj, bool removed);
  // Drops ownerReferences to `owner_uid` from every object (best effort).
  void OrphanDependents(const std::string& owner_uid);

  Store* store_;
  Registry* registry_;
  std::function<void()> on_delete_;
};

}  // namespace kubelocal
