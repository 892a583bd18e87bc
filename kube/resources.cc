#include "kube/resources.h"

#include "core/time.h"
#include "kube/line_splitter.h"

namespace kube {

std::string ResourceType::BasePath() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ResourceType::CollectionPath(const std::string& ns) const {
  if (namespaced && !ns.empty()) return BasePath() + "/namespaces/" + ns + "/" + plural;
  return BasePath() + "/" + plural;
}

std::string ResourceType::ObjectPath(const std::string& ns, const std::string& name) const {
  return CollectionPath(ns) + "/" + name;
}

namespace resources {
const ResourceType kPods{"", "v1", "pods", "Pod", true};
const ResourceType kServices{"", "v1", "services", "Service", true};
const ResourceType kEvents{"", "v1", "events", "Event", true};
const ResourceType kNodes{"", "v1", "nodes", "Node", false};
const ResourceType kNamespaces{"", "v1", "namespaces", "Namespace", false};
const ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const ResourceType kServiceAccounts{"", "v1", "serviceaccounts", "ServiceAccount", true};
const ResourceType kRoles{"rbac.authorization.k8s.io", "v1", "roles", "Role", true};
const ResourceType kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true};
ResourceType Custom(std::string group, std::string version, std::string plural, std::string kind,
                    bool namespaced) {
  return ResourceType{std::move(group), std::move(version), std::move(plural), std::move(kind),
                      namespaced};
}
}  // namespace resources

const char* WatchEventTypeName(WatchEvent::Type t) {
  switch (t) {
    case WatchEvent::Type::kAdded:
      return "ADDED";
    case WatchEvent::Type::kModified:
      return "MODIFIED";
    case WatchEvent::Type::kDeleted:
      return "DELETED";
    case WatchEvent::Type::kBookmark:
      return "BOOKMARK";
    case WatchEvent::Type::kError:
      return "ERROR";
  }
  return "?";
}

namespace {
const Json& Meta(const Json& obj) {
  static const Json kEmpty = Json::object();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find("metadata");
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}
std::string MetaStr(const Json& obj, const char* key) {
  const Json& m = Meta(obj);
  auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : "";
}
const char* ContentType(PatchType t) {
  switch (t) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}
}  // namespace

std::string NameOf(const Json& obj) { return MetaStr(obj, "name"); }
std::string NamespaceOf(const Json& obj) { return MetaStr(obj, "namespace"); }
std::string ResourceVersionOf(const Json& obj) { return MetaStr(obj, "resourceVersion"); }
std::string UidOf(const Json& obj) { return MetaStr(obj, "uid"); }

ResourceClient::ResourceClient(std::shared_ptr<RestClient> client, ResourceType type,
                               std::string ns)
    : client_(std::move(client)),
      type_(std::move(type)),
      ns_(type_.namespaced ? std::move(ns) : "") {}

StatusOr<std::string> ResourceClient::NamespaceFor(const Json* obj) const {
  if (!type_.namespaced) return std::string();
  std::string ns = obj ? NamespaceOf(*obj) : "";
  if (!ns.empty() && !ns_.empty() && ns != ns_)
    return hypertrain::InvalidArgument("object namespace \"" + ns +
                                       "\" does not match client namespace \"" + ns_ + "\"");
  if (ns.empty()) ns = ns_;
  if (ns.empty())
    return hypertrain::InvalidArgument(type_.plural +
                                       " are namespaced: this call needs a namespace");
  return ns;
}

static Status CheckName(const std::string& name) {
  if (name.empty()) return hypertrain::InvalidArgument("empty object name");
  if (name.find('/') != std::string::npos || name.find('?') != std::string::npos ||
      name.find('%') != std::string::npos || name == "." || name == "..")
    return hypertrain::InvalidArgument("invalid object name \"" + name + "\"");
  return {};
}

StatusOr<std::string> ResourceClient::ObjectPathFor(const Json* obj, const std::string& name,
                                                   const std::string& subresource) const {
  HT_RETURN_IF_ERROR(CheckName(name));
  if (!subresource.empty() && subresource != "status")
    return hypertrain::InvalidArgument("unknown subresource \"" + subresource + "\"");
  auto ns = NamespaceFor(obj);
  if (!ns.ok()) return ns.status();
  return type_.ObjectPath(*ns, name) + (subresource.empty() ? "" : "/" + subresource);
}

Json ResourceClient::WithTypeMeta(const Json& obj) const {
  Json body = obj;
  if (!body.contains("apiVersion")) body["apiVersion"] = type_.ApiVersion();
  if (!body.contains("kind")) body["kind"] = type_.kind;
  return body;
}

StatusOr<Json> ResourceClient::Get(const std::string& name, const std::string& subresource) const {
  Request r;
  HT_ASSIGN_OR_RETURN(r.path, ObjectPathFor(nullptr, name, subresource));
  return client_->SendJson(r);
}

StatusOr<ListResult> ResourceClient::List(const ListOptions& o) const {
  Request r;
  r.path = type_.CollectionPath(ns_);
  if (!o.label_selector.empty()) r.query.emplace_back("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) r.query.emplace_back("fieldSelector", o.field_selector);
  if (o.limit > 0) r.query.emplace_back("limit", std::to_string(o.limit));
  if (!o.continue_token.empty()) r.query.emplace_back("continue", o.continue_token);
  if (!o.resource_version.empty()) r.query.emplace_back("resourceVersion", o.resource_version);
  auto j = client_->SendJson(r);
  if (!j.ok()) return j.status();
  if (!j->is_object() || !j->contains("items") ||
      !((*j)["items"].is_array() || (*j)["items"].is_null()))
    return hypertrain::Internal("list " + r.path + ": response has no items array");
  ListResult out;
  if ((*j)["items"].is_array()) out.items = std::move((*j)["items"]);
  const Json& m = Meta(*j);
  out.resource_version = m.value("resourceVersion", "");
  out.continue_token = m.value("continue", "");
  // List items omit apiVersion/kind; restore them so objects are self-describing.
  for (auto& it : out.items) {
    if (!it.contains("apiVersion")) it["apiVersion"] = type_.ApiVersion();
    if (!it.contains("kind")) it["kind"] = type_.kind;
  }
  return out;
}

StatusOr<ListResult> ResourceClient::ListAll(ListOptions o) const {
  if (o.limit <= 0) o.limit = 500;
  for (int restart = 0; restart < 4; ++restart) {
    ListResult all;
    ListOptions page = o;
    page.continue_token.clear();
    bool expired = false;
    for (int pages = 0;; ++pages) {
      auto r = List(page);
      if (!r.ok()) {
        if (IsGone(r.status()) && !page.continue_token.empty()) {
          expired = true;  // the continue token outlived the server's history
          break;
        }
        return r.status();
      }
      for (auto& it : r->items) all.items.push_back(std::move(it));
      all.resource_version = r->resource_version;  // every page reports the snapshot's RV
      if (r->continue_token.empty()) return all;
      page.continue_token = r->continue_token;
      page.resource_version.clear();  // continue implies the first page's snapshot
      if (pages > 100000) return hypertrain::Internal("list never ends");
    }
    if (!expired) break;
  }
  return hypertrain::Expired("list continue token expired repeatedly");
}

StatusOr<Json> ResourceClient::Create(const Json& obj) const {
  if (!obj.is_object()) return hypertrain::InvalidArgument("create: object is not a JSON object");
  auto ns = NamespaceFor(&obj);
  if (!ns.ok()) return ns.status();
  if (NameOf(obj).empty() && MetaStr(obj, "generateName").empty())
    return hypertrain::InvalidArgument("create: metadata.name or metadata.generateName required");
  Json body = WithTypeMeta(obj);
  if (type_.namespaced) body["metadata"]["namespace"] = *ns;
  Request r;
  r.method = "POST";
  r.path = type_.CollectionPath(*ns);
  r.body = body.dump();
  return client_->SendJson(r);
}

StatusOr<Json> ResourceClient::Update(const Json& obj, const std::string& subresource) const {
  Request r;
  r.method = "PUT";
  HT_ASSIGN_OR_RETURN(r.path, ObjectPathFor(&obj, obj.is_object() ? NameOf(obj) : "", subresource));
  r.body = WithTypeMeta(obj).dump();
  return client_->SendJson(r);
}

StatusOr<Json> ResourceClient::Patch(const std::string& name, const Json& patch, PatchType t,
                                     const std::string& subresource) const {
  Request r;
  r.method = "PATCH";
  HT_ASSIGN_OR_RETURN(r.path, ObjectPathFor(nullptr, name, subresource));
  r.body = patch.dump();
  r.content_type = ContentType(t);
  return client_->SendJson(r);
}

StatusOr<Json> ResourceClient::Apply(const Json& obj, const std::string& field_manager,
                                     bool force) const {
  if (field_manager.empty())
    return hypertrain::InvalidArgument("server-side apply needs a fieldManager");
  Request r;
  r.method = "PATCH";
  HT_ASSIGN_OR_RETURN(r.path, ObjectPathFor(&obj, obj.is_object() ? NameOf(obj) : "", ""));
  r.query = {{"fieldManager", field_manager}};
  if (force) r.query.emplace_back("force", "true");
  r.body = WithTypeMeta(obj).dump();
  r.content_type = "application/apply-patch+yaml";
  return client_->SendJson(r);
}

StatusOr<Json> ResourceClient::Delete(const std::string& name, const DeleteOptions& o) const {
  Request r;
  r.method = "DELETE";
  HT_ASSIGN_OR_RETURN(r.path, ObjectPathFor(nullptr, name, ""));
  Json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (!o.precondition_uid.empty()) body["preconditions"]["uid"] = o.precondition_uid;
  if (!o.precondition_resource_version.empty())
    body["preconditions"]["resourceVersion"] = o.precondition_resource_version;
  r.body = body.dump();
  return client_->SendJson(r);
}

StatusOr<Json> ResourceClient::PatchAnnotations(
    const std::string& name, const std::map<std::string, std::optional<std::string>>& kv) const {
  Json ann = Json::object();
  for (const auto& [k, v] : kv) ann[k] = v ? Json(*v) : Json(nullptr);
  return Patch(name, {{"metadata", {{"annotations", ann}}}}, PatchType::kMerge);
}

StatusOr<Json> RecordEvent(RestClient& client, const Json& involved, const std::string& type,
                           const std::string& reason, const std::string& message,
                           const std::string& component) {
  if (type != "Normal" && type != "Warning")
    return hypertrain::InvalidArgument("event type must be Normal or Warning");
  std::string name = NameOf(involved), ns = NamespaceOf(involved);
  if (name.empty()) return hypertrain::InvalidArgument("event: involved object has no name");
  if (ns.empty()) ns = "default";  // events about cluster-scoped objects live in default
  const std::string now = hypertrain::FormatRfc3339(std::chrono::system_clock::now());
  Json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"generateName", name + "."}, {"namespace", ns}}},
             {"involvedObject",
              {{"apiVersion", involved.value("apiVersion", "")},
               {"kind", involved.value("kind", "")},
               {"name", name},
               {"namespace", NamespaceOf(involved)},
               {"uid", UidOf(involved)},
               {"resourceVersion", ResourceVersionOf(involved)}}},
             {"type", type},
             {"reason", reason},
             {"message", message.size() > 1024 ? message.substr(0, 1024) : message},
             {"source", {{"component", component}}},
             {"reportingComponent", component},
             {"firstTimestamp", now},
             {"lastTimestamp", now},
             {"count", 1}};
  Request r;
  r.method = "POST";
  r.path = resources::kEvents.CollectionPath(ns);
  r.body = ev.dump();
  return client.SendJson(r);
}

StatusOr<Json> ResourceClient::UpdateWithRetry(const std::string& name,
                                               const std::function<Status(Json&)>& mutate,
                                               int attempts) const {
  Status last = hypertrain::Aborted("no attempt made");
  for (int i = 0; i < std::max(1, attempts); ++i) {
    auto cur = Get(name);
    if (!cur.ok()) return cur.status();
    Json obj = std::move(*cur);
    HT_RETURN_IF_ERROR(mutate(obj));
    auto r = Update(obj);  // carries the read resourceVersion: a precondition
    if (r.ok() || !IsConflict(r.status())) return r;
    last = r.status();
  }
  return last.WithMessage(last.message() + " (gave up after " + std::to_string(attempts) +
                          " conflicting updates)");
}

Status ResourceClient::Watch(const WatchOptions& o,
                             const std::function<bool(const WatchEvent&)>& on_event,
                             CancelToken* cancel) const {
  Request r;
  r.path = type_.CollectionPath(ns_);
  r.query.emplace_back("watch", "1");
  if (!o.resource_version.empty()) r.query.emplace_back("resourceVersion", o.resource_version);
  if (o.allow_bookmarks) r.query.emplace_back("allowWatchBookmarks", "true");
  if (!o.label_selector.empty()) r.query.emplace_back("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) r.query.emplace_back("fieldSelector", o.field_selector);
  int ts = o.timeout_seconds > 0 ? o.timeout_seconds : 300;
  r.query.emplace_back("timeoutSeconds", std::to_string(ts));
  // The server ends the watch after ts; allow for slack before calling it dead.
  r.timeout = std::chrono::milliseconds((ts + 30) * 1000LL);

  LineSplitter splitter;
  std::optional<Status> decode_error;
  bool stopped = false;
  auto on_line = [&](std::string_view line) -> bool {
    Json ev = Json::parse(line, nullptr, false);
    if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string() ||
        !ev.contains("object")) {
      decode_error = hypertrain::Internal("watch " + r.path + ": undecodable event (" +
                                          std::to_string(line.size()) + " bytes)");
      return false;
    }
    const std::string t = ev["type"].get<std::string>();
    WatchEvent e;
    if (t == "ADDED")
      e.type = WatchEvent::Type::kAdded;
    else if (t == "MODIFIED")
      e.type = WatchEvent::Type::kModified;
    else if (t == "DELETED")
      e.type = WatchEvent::Type::kDeleted;
    else if (t == "BOOKMARK")
      e.type = WatchEvent::Type::kBookmark;
    else if (t == "ERROR")
      e.type = WatchEvent::Type::kError;
    else {
      decode_error = hypertrain::Internal("watch: unknown event type \"" + t + "\"");
      return false;
    }
    e.object = std::move(ev["object"]);
    if (!on_event(e)) {
      stopped = true;
      return false;
    }
    return true;
  };
  auto res = client_->Stream(
      r,
      [&](std::string_view data) {
        if (!splitter.Feed(data, on_line)) {
          if (!stopped && !decode_error)
            decode_error = hypertrain::Internal("watch: event exceeds the line limit");
          return false;
        }
        return true;
      },
      cancel);
  if (decode_error) return *decode_error;
  return res;
}

}  // namespace kube
