#pragma once
// Typed access to API resources on nlohmann::json objects.
//
// A ResourceClient is bound to one resource type and (for namespaced types)
// one namespace; an empty namespace on a namespaced type means "all
// namespaces" and only allows List/Watch. All calls go through RestClient
// (limits, retries, timeouts, response → Status mapping).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kube/cancel.h"
#include "kube/rest_client.h"
#include "kube/status.h"

namespace kube {

struct ResourceType {
  std::string group;    // "" for the core group
  std::string version;  // "v1"
  std::string plural;   // "pods"
  std::string kind;     // "Pod"
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // "/api/v1" or "/apis/<group>/<version>".
  std::string BasePath() const;
  // Collection path; `ns` ignored for cluster-scoped types, empty → all namespaces.
  std::string CollectionPath(const std::string& ns) const;
  std::string ObjectPath(const std::string& ns, const std::string& name) const;
};

namespace resources {
extern const ResourceType kPods;
extern const ResourceType kServices;
extern const ResourceType kEvents;
extern const ResourceType kNodes;
extern const ResourceType kNamespaces;
extern const ResourceType kConfigMaps;
extern const ResourceType kLeases;  // coordination.k8s.io/v1
extern const ResourceType kServiceAccounts;
extern const ResourceType kRoles;         // rbac.authorization.k8s.io/v1
extern const ResourceType kRoleBindings;  // rbac.authorization.k8s.io/v1
ResourceType Custom(std::string group, std::string version, std::string plural, std::string kind,
                    bool namespaced = true);
}  // namespace resources

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // page size; 0 → server default (everything)
  std::string continue_token;
  std::string resource_version;  // "" → most recent (quorum read)
};

struct ListResult {
  Json items = Json::array();
  std::string resource_version;  // list's metadata.resourceVersion
  std::string continue_token;    // empty on the last page
};

struct DeleteOptions {
  std::string propagation_policy;  // "", "Foreground", "Background", "Orphan"
  std::optional<int64_t> grace_period_seconds;
  std::string precondition_uid;
  std::string precondition_resource_version;
};

enum class PatchType { kMerge, kJson, kStrategicMerge };

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version ("" → from now, "0" → any)
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // server closes the watch after this; the client allows +30 s
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type;
  Json object;  // for kError: the Status object
};
const char* WatchEventTypeName(WatchEvent::Type t);

class ResourceClient {
 public:
  ResourceClient(std::shared_ptr<RestClient> client, ResourceType type, std::string ns = "");

  const ResourceType& type() const { return type_; }
  const std::string& ns() const { return ns_; }
  ResourceClient InNamespace(const std::string& ns) const { return {client_, type_, ns}; }

  // `subresource` "" addresses the object itself, "status" its status
  // subresource (the GetStatus/UpdateStatus/PatchStatus spellings below).
  StatusOr<Json> Get(const std::string& name, const std::string& subresource = "") const;
  // One page (honours limit/continue).
  StatusOr<ListResult> List(const ListOptions& opts = {}) const;
  // Every page: follows continue tokens (page size opts.limit, default 500). If
  // a continue token expires (410) the whole list restarts (at most 3 times).
  StatusOr<ListResult> ListAll(ListOptions opts = {}) const;
  // Fills apiVersion/kind (and metadata.namespace) when absent; metadata.generateName works.
  StatusOr<Json> Create(const Json& obj) const;
  // PUT. With metadata.resourceVersion set the server rejects a stale object with 409 (kConflict).
  StatusOr<Json> Update(const Json& obj, const std::string& subresource = "") const;
  StatusOr<Json> Patch(const std::string& name, const Json& patch, PatchType type = PatchType::kMerge,
                       const std::string& subresource = "") const;
  // Server-side apply (application/apply-patch+yaml; JSON is YAML).
  StatusOr<Json> Apply(const Json& obj, const std::string& field_manager, bool force = false) const;
  // Returns the server's answer (the object with deletionTimestamp, or a Status).
  StatusOr<Json> Delete(const std::string& name, const DeleteOptions& opts = {}) const;

  // Merge-patches metadata.annotations: a value sets the key, nullopt removes it.
  // (The trainer's launcher publishes progress this way.)
  StatusOr<Json> PatchAnnotations(
      const std::string& name, const std::map<std::string, std::optional<std::string>>& kv) const;

  // The status subresource: the main resource ignores status, this ignores the rest.
  StatusOr<Json> GetStatus(const std::string& name) const { return Get(name, "status"); }
  StatusOr<Json> UpdateStatus(const Json& obj) const { return Update(obj, "status"); }
  StatusOr<Json> PatchStatus(const std::string& name, const Json& patch,
                             PatchType type = PatchType::kMerge) const {
    return Patch(name, patch, type, "status");
  }

  // GET, mutate, PUT with the read resourceVersion; on 409 re-read and retry
  // (at most `attempts` times). `mutate` returning an error aborts.
  StatusOr<Json> UpdateWithRetry(const std::string& name,
                                 const std::function<Status(Json&)>& mutate,
                                 int attempts = 5) const;

  // One watch request. `on_event` gets each event in order (return false to
  // stop). Returns OK when the server closed the stream normally, kGone on
  // HTTP 410, kCancelled on cancel, or the transport/HTTP error. ERROR events
  // inside the stream are delivered to `on_event` (type kError), not returned.
  Status Watch(const WatchOptions& opts, const std::function<bool(const WatchEvent&)>& on_event,
               CancelToken* cancel = nullptr) const;

  RestClient& rest() const { return *client_; }

 private:
  StatusOr<std::string> NamespaceFor(const Json* obj) const;
  // Path of object `name` (and its subresource) in the namespace `obj` (or the client) names.
  StatusOr<std::string> ObjectPathFor(const Json* obj, const std::string& name,
                                      const std::string& subresource) const;
  // `obj` with apiVersion and kind filled in when absent.
  Json WithTypeMeta(const Json& obj) const;
  std::shared_ptr<RestClient> client_;
  ResourceType type_;
  std::string ns_;
};

// Records a core/v1 Event about `involved` (an object with apiVersion, kind and
// metadata). `type` is "Normal" or "Warning"; `reason` is UpperCamelCase.
// Events are not aggregated (each call creates one Event named <name>.<random>).
StatusOr<Json> RecordEvent(RestClient& client, const Json& involved, const std::string& type,
                           const std::string& reason, const std::string& message,
                           const std::string& component);

// metadata helpers
std::string NameOf(const Json& obj);
std::string NamespaceOf(const Json& obj);
std::string ResourceVersionOf(const Json& obj);
std::string UidOf(const Json& obj);

}  // namespace kube
