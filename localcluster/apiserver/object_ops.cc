#include "localcluster/apiserver/object_ops.h"

#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "localcluster/apiserver/admission.h"

namespace kubelocal {
namespace {

const char kNamespaces[] = "/namespaces";

std::string RandomSuffix() {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  unsigned char b[5];
  RAND_bytes(b, sizeof(b));
  std::string s;
  for (unsigned char c : b) s.push_back(kAlphabet[c % (sizeof(kAlphabet) - 1)]);
  return s;
}

// The optimistic-concurrency check of update and patch: a resourceVersion in
// the request must be the stored one.
Status CheckResourceVersion(const ResourceType& t, const std::string& name, const std::string& want_rv,
                            const json& current) {
  if (want_rv.empty() || want_rv == MetaStr(current, "resourceVersion")) return Status();
  return Conflict(t.qualified(), name,
                  "the object has been modified; please apply your changes to the latest version and try again");
}

bool HasFinalizers(const json& o) {
  return o.contains("/metadata/finalizers"_json_pointer) && o["metadata"]["finalizers"].is_array() &&
         !o["metadata"]["finalizers"].empty();
}

bool Deleting(const json& o) { return o.contains("/metadata/deletionTimestamp"_json_pointer); }

bool IsPods(const ResourceType& t) { return t.group.empty() && t.plural == "pods"; }

FieldCause Cause(const std::string& reason, const std::string& field, const std::string& msg) {
  return {reason, field, msg};
}

}  // namespace

json ObjectOps::ForVersion(const ResourceType& t, json obj) {
  if (obj.is_object()) {
    obj["apiVersion"] = t.api_version();
    obj["kind"] = t.kind;
  }
  return obj;
}

StatusOr<DeleteOptions> DeleteOptions::Parse(
    const std::string& body, const std::function<std::string(const std::string&)>& query) {
  DeleteOptions o;
  json b = json::object();
  if (!body.empty()) {
    b = json::parse(body, nullptr, false);
    if (b.is_discarded() || !b.is_object()) return BadRequest("invalid DeleteOptions body");
  }
  if (b.contains("gracePeriodSeconds") && b["gracePeriodSeconds"].is_number_integer()) {
    o.grace_period_seconds = b["gracePeriodSeconds"].get<int64_t>();
  }
  if (std::string q = query("gracePeriodSeconds"); !q.empty()) {
    try {
      o.grace_period_seconds = std::stoll(q);
    } catch (const std::exception&) {
      return BadRequest("invalid gracePeriodSeconds: " + q);
    }
  }
  o.propagation_policy = b.value("propagationPolicy", "");
  if (std::string q = query("propagationPolicy"); !q.empty()) o.propagation_policy = q;
  if (o.propagation_policy.empty() && b.contains("orphanDependents") &&
      b["orphanDependents"].is_boolean()) {
    o.propagation_policy = b["orphanDependents"].get<bool>() ? "Orphan" : "Background";
  }
  if (o.propagation_policy.empty()) o.propagation_policy = "Background";
  if (o.propagation_policy != "Background" && o.propagation_policy != "Foreground" &&
      o.propagation_policy != "Orphan") {
    return MakeApiError(
        422, "Invalid",
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"" +
            o.propagation_policy +
            "\": supported values: \"Foreground\", \"Background\", \"Orphan\"");
  }
  if (b.contains("preconditions") && b["preconditions"].is_object()) {
    o.precondition_uid = b["preconditions"].value("uid", "");
    o.precondition_rv = b["preconditions"].value("resourceVersion", "");
  }
  o.dry_run = query("dryRun") == "All" ||
              (b.contains("dryRun") && b["dryRun"].is_array() && !b["dryRun"].empty());
  return o;
}

StatusOr<json> ObjectOps::Get(const ResourceType& t, const std::string& ns,
                              const std::string& name) const {
  auto o = store_->Get(t.storage_key(), t.namespaced ? ns : "", name);
  if (!o) return NotFound(t.qualified(), name);
  return ForVersion(t, std::move(*o));
}

Status ObjectOps::CheckNamespace(const ResourceType& t, const std::string& ns,
                                 const std::string& name) {
  if (!t.namespaced) return Status();
  if (ns.empty()) return BadRequest("the namespace of the object must be set for " + t.qualified());
  auto nso = store_->Get(kNamespaces, "", ns);
  if (!nso) return NotFound("namespaces", ns);
  if (Deleting(*nso)) {
    const std::string why =
        "unable to create new content in namespace " + ns + " because it is being terminated";
    return Forbidden(t.qualified() + " \"" + name + "\" is forbidden: " + why, t.plural, name);
  }
  return Status();
}

Status ObjectOps::Admit(const ResourceType& t, json& obj, const json& old, const WriteOptions& opts,
                        std::vector<std::string>* warnings) {
  std::vector<FieldCause> causes;
  Status s;
  if (t.is_crd) {
    s = AdmitCustomResource(t.schema, opts.field_validation, obj, warnings, &causes);
  } else if (IsPods(t)) {
    AdmitPod(obj, old, &causes);
  } else if (t.group.empty() && t.plural == "services") {
    AdmitService(obj, old, &causes);
  } else if (t.group.empty() && t.plural == "namespaces") {
    AdmitNamespace(obj);
  } else if (t.group == "apiextensions.k8s.io") {
    s = AdmitCrd(obj, registry_->All(), &causes);
  }
  if (!s.ok()) return s;
  if (!causes.empty()) return Invalid(t.kind_group(), MetaStr(obj, "name"), causes);
  return Status();
}

StatusOr<json> ObjectOps::Create(const ResourceType& t, const std::string& ns, json obj,
                                 const WriteOptions& opts, std::vector<std::string>* warnings) {
  if (!obj.is_object()) return BadRequest("the request body must be a JSON object");
  if (obj.contains("kind") && obj["kind"].is_string() && obj["kind"] != t.kind) {
    return BadRequest("the kind in the data (" + obj["kind"].get<std::string>() +
                      ") does not match the expected kind (" + t.kind + ")");
  }
  if (obj.contains("apiVersion") && obj["apiVersion"].is_string() &&
      obj["apiVersion"] != t.api_version()) {
    return BadRequest("the API version in the data (" + obj["apiVersion"].get<std::string>() +
                      ") does not match the expected API version (" + t.api_version() + ")");
  }
  obj["kind"] = t.kind;
  obj["apiVersion"] = t.api_version();
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  json& meta = obj["metadata"];
  if (t.namespaced) {
    std::string body_ns = MetaStr(obj, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequest("the namespace of the provided object does not match the namespace sent "
                        "on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  const std::string generate = MetaStr(obj, "generateName");
  std::string name = MetaStr(obj, "name");
  if (name.empty() && generate.empty()) {
    return Invalid(t.kind_group(), "",
                   {Cause("FieldValueRequired", "metadata.name",
                          "Required value: name or generateName is required")});
  }
  if (Status e = CheckNamespace(t, ns, name.empty() ? generate : name); !e.ok()) return e;
  const bool label_name = t.group.empty() && (t.plural == "namespaces" || t.plural == "services");
  meta.erase("resourceVersion");
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("managedFields");
  meta.erase("selfLink");
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = NowRfc3339();
  meta["generation"] = 1;
  if (t.has_status && t.is_crd) obj.erase("status");
  if (IsPods(t)) obj["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
  if (Status e = Admit(t, obj, nullptr, opts, warnings); !e.ok()) return e;

  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string n = name.empty() ? generate + RandomSuffix() : name;
    bool ok = label_name ? IsDnsLabel(n) : IsDnsSubdomain(n);
    if (!ok) {
      return Invalid(t.kind_group(), n,
                     {Cause("FieldValueInvalid", "metadata.name",
                            "Invalid value: \"" + n + "\": a lowercase RFC 1123 " +
                                std::string(label_name ? "label" : "subdomain") +
                                " must consist of lower case alphanumeric characters, '-' or '.', "
                                "and must start and end with an alphanumeric character")});
    }
    obj["metadata"]["name"] = n;
    json stored;
    auto r = store_->Mutate(t.storage_key(), t.namespaced ? ns : "", n,
                            [&](const std::optional<json>& cur) -> StatusOr<Mutation> {
                              if (cur) return AlreadyExists(t.qualified(), n);
                              if (opts.dry_run) {
                                stored = obj;
                                return Mutation::None();
                              }
                              return Mutation::Put(obj);
                            });
    if (!r.ok()) {
      if (Reason(r.status()) == "AlreadyExists" && name.empty()) continue;
      return r.status();
    }
    if (opts.dry_run) return ForVersion(t, stored);
    AfterWrite(t, *r, false);
    return ForVersion(t, *r);
  }
  return AlreadyExists(t.qualified(), generate + "*");
}

StatusOr<Mutation> ObjectOps::FinishUpdate(const ResourceType& t, const json& cur, json next,
                                           bool status_only, const WriteOptions& opts,
                                           std::vector<std::string>* warnings) {
  if (!next.is_object()) return BadRequest("the request body must be a JSON object");
  const std::string name = MetaStr(cur, "name");
  json out;
  if (status_only) {
    out = cur;
    if (next.contains("status")) {
      out["status"] = next["status"];
    } else {
      out.erase("status");
    }
  } else {
    out = std::move(next);
    if (!out.contains("metadata") || !out["metadata"].is_object()) out["metadata"] = json::object();
    if (t.has_status) {
      if (cur.contains("status")) {
        out["status"] = cur["status"];
      } else {
        out.erase("status");
      }
    }
    json& m = out["metadata"];
    const json& cm = cur["metadata"];
    for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "generation", "namespace", "name"}) {
      if (cm.contains(k)) {
        m[k] = cm[k];
      } else {
        m.erase(k);
      }
    }
    m.erase("managedFields");
    if (Deleting(cur)) {
      std::set<std::string> before;
      if (cm.contains("finalizers")) {
        for (const auto& f : cm["finalizers"]) before.insert(f.dump());
      }
      if (m.contains("finalizers") && m["finalizers"].is_array()) {
        for (const auto& f : m["finalizers"]) {
          if (!before.count(f.dump())) {
            return Invalid(t.kind_group(), name,
                           {Cause("FieldValueForbidden", "metadata.finalizers",
                                  "Forbidden: no new finalizers can be added if the object is "
                                  "being deleted, found new finalizers [" + f.get<std::string>() +
                                      "]")});
          }
        }
      }
    }
  }
  out["kind"] = t.kind;
  out["apiVersion"] = t.api_version();
  if (Status e = Admit(t, out, cur, opts, warnings); !e.ok()) return e;
  if (!status_only && SpecChanged(cur, out)) {
    out["metadata"]["generation"] = cur["metadata"].value("generation", int64_t{1}) + 1;
  }
  out["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"];
  if (out == cur) return Mutation::None();
  if (Deleting(out) && !HasFinalizers(out) &&
      out["metadata"].value("deletionGracePeriodSeconds", int64_t{0}) == 0) {
    return Mutation::Delete();
  }
  return Mutation::Put(std::move(out));
}

StatusOr<json> ObjectOps::Update(const ResourceType& t, const std::string& ns,
                                 const std::string& name, json obj, bool status_only,
                                 const WriteOptions& opts, std::vector<std::string>* warnings) {
  if (!obj.is_object()) return BadRequest("the request body must be a JSON object");
  const std::string body_name = MetaStr(obj, "name");
  if (!body_name.empty() && body_name != name) {
    return BadRequest("the name of the object (" + body_name +
                      ") does not match the name on the URL (" + name + ")");
  }
  if (t.namespaced) {
    std::string body_ns = MetaStr(obj, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequest("the namespace of the provided object does not match the namespace sent "
                        "on the request");
    }
  }
  if (obj.contains("kind") && obj["kind"].is_string() && obj["kind"] != t.kind) {
    return BadRequest("the kind in the data (" + obj["kind"].get<std::string>() +
                      ") does not match the expected kind (" + t.kind + ")");
  }
  const std::string want_rv = MetaStr(obj, "resourceVersion");
  bool removed = false;
  json dry;
  auto r = store_->Mutate(
      t.storage_key(), t.namespaced ? ns : "", name,
      [&](const std::optional<json>& cur) -> StatusOr<Mutation> {
        if (!cur) return NotFound(t.qualified(), name);
        if (Status e = CheckResourceVersion(t, name, want_rv, *cur); !e.ok()) return e;
        auto m = FinishUpdate(t, *cur, obj, status_only, opts, warnings);
        if (!m.ok()) return m.status();
        removed = m->kind == Mutation::Kind::kDelete;
        if (opts.dry_run) {
          dry = m->kind == Mutation::Kind::kPut ? m->object : *cur;
          return Mutation::None();
        }
        return m;
      });
  if (!r.ok()) return r.status();
  if (opts.dry_run) return ForVersion(t, dry);
  AfterWrite(t, *r, removed);
  return ForVersion(t, *r);
}

StatusOr<json> ObjectOps::Patch(const ResourceType& t, const std::string& ns,
                                const std::string& name, PatchType type, const std::string& body,
                                bool status_only, const WriteOptions& opts,
                                std::vector<std::string>* warnings) {
  if (type == PatchType::kStrategic && t.is_crd) {
    return UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
  }
  bool create = false;
  bool removed = false;
  json dry;
  auto r = store_->Mutate(
      t.storage_key(), t.namespaced ? ns : "", name,
      [&](const std::optional<json>& cur) -> StatusOr<Mutation> {
        if (!cur) {
          if (type == PatchType::kApply && !status_only) {
            create = true;
            return Mutation::None();
          }
          return NotFound(t.qualified(), name);
        }
        json base = ForVersion(t, *cur);
        auto patched = ApplyPatch(base, type, body);
        if (!patched.ok()) return patched.status();
        if (Status e = CheckResourceVersion(t, name, MetaStr(*patched, "resourceVersion"), *cur); !e.ok()) {
          return e;
        }
        if (MetaStr(*patched, "name") != name) {
          return BadRequest("the name of the object (" + MetaStr(*patched, "name") +
                            ") does not match the name on the URL (" + name + ")");
        }
        auto m = FinishUpdate(t, *cur, std::move(*patched), status_only, opts, warnings);
        if (!m.ok()) return m.status();
        removed = m->kind == Mutation::Kind::kDelete;
        if (opts.dry_run) {
          dry = m->kind == Mutation::Kind::kPut ? m->object : *cur;
          return Mutation::None();
        }
        return m;
      });
  if (!r.ok()) return r.status();
  if (create) {
    auto obj = YamlToJson(body);
    if (!obj.ok()) return obj.status();
    if (!obj->is_object()) return BadRequest("apply patch must be an object");
    (*obj)["metadata"]["name"] = name;
    return Create(t, ns, std::move(*obj), opts, warnings);
  }
  if (opts.dry_run) return ForVersion(t, dry);
  AfterWrite(t, *r, removed);
  return ForVersion(t, *r);
}

void ObjectOps::OrphanDependents(const std::string& owner_uid) {
  for (auto& [res, obj] : store_->Snapshot()) {
    if (!obj.contains("/metadata/ownerReferences"_json_pointer)) continue;
    (void)store_->Mutate(
        res, MetaStr(obj, "namespace"), MetaStr(obj, "name"),  // best effort
        [&](const std::optional<json>& cur) -> StatusOr<Mutation> {
          if (!cur || !cur->contains("/metadata/ownerReferences"_json_pointer)) return Mutation::None();
          json next = *cur;
          json refs = json::array();
          for (const auto& ref : next["metadata"]["ownerReferences"]) {
            if (ref.value("uid", "") != owner_uid) refs.push_back(ref);
          }
          if (refs.size() == next["metadata"]["ownerReferences"].size()) return Mutation::None();
          if (refs.empty()) {
            next["metadata"].erase("ownerReferences");
          } else {
            next["metadata"]["ownerReferences"] = refs;
          }
          return Mutation::Put(std::move(next));
        });
  }
}

StatusOr<ObjectOps::Deleted> ObjectOps::Delete(const ResourceType& t, const std::string& ns,
                                               const std::string& name, const DeleteOptions& opts) {
  if (opts.propagation_policy == "Orphan" && !opts.dry_run) {
    // Orphan dependents first (the apiserver does this through the "orphan" finalizer).
    if (auto owner = store_->Get(t.storage_key(), t.namespaced ? ns : "", name)) {
      OrphanDependents(MetaStr(*owner, "uid"));
    }
  }
  Deleted out;
  auto r = store_->Mutate(
      t.storage_key(), t.namespaced ? ns : "", name,
      [&](const std::optional<json>& cur) -> StatusOr<Mutation> {
        if (!cur) return NotFound(t.qualified(), name);
        if (!opts.precondition_uid.empty() && opts.precondition_uid != MetaStr(*cur, "uid")) {
          return Conflict(t.qualified(), name,
                          "Precondition failed: UID in precondition: " + opts.precondition_uid +
                              ", UID in object meta: " + MetaStr(*cur, "uid"));
        }
        if (!opts.precondition_rv.empty() &&
            opts.precondition_rv != MetaStr(*cur, "resourceVersion")) {
          return Conflict(t.qualified(), name,
                          "Precondition failed: ResourceVersion in precondition: " +
                              opts.precondition_rv + ", ResourceVersion in object meta: " +
                              MetaStr(*cur, "resourceVersion"));
        }
        json next = *cur;
        json& m = next["metadata"];
        int64_t grace = 0;
        if (IsPods(t)) {
          grace = opts.grace_period_seconds.value_or(
              next.value("/spec/terminationGracePeriodSeconds"_json_pointer, int64_t{30}));
          const std::string phase = next.value("/status/phase"_json_pointer, std::string());
          if (next.value("/spec/nodeName"_json_pointer, std::string()).empty() ||
              phase == "Succeeded" || phase == "Failed") {
            grace = 0;
          }
          if (grace < 0) grace = 0;
          // A second delete may only shorten the grace period.
          if (Deleting(next) && m.contains("deletionGracePeriodSeconds") &&
              m["deletionGracePeriodSeconds"].get<int64_t>() < grace) {
            grace = m["deletionGracePeriodSeconds"].get<int64_t>();
          }
        }
        bool foreground = opts.propagation_policy == "Foreground";
        if (foreground) {
          json& fins = m["finalizers"];
          if (!fins.is_array()) fins = json::array();
          if (std::find(fins.begin(), fins.end(), "foregroundDeletion") == fins.end()) {
            fins.push_back("foregroundDeletion");
          }
        }
        // Namespaces terminate first: the GC empties them, then removes them.
        const bool ns_terminating = t.group.empty() && t.plural == "namespaces";
        if (ns_terminating) next["status"]["phase"] = "Terminating";
        if (grace == 0 && !HasFinalizers(next) && !ns_terminating) {
          out.removed = true;
          if (opts.dry_run) return Mutation::None();
          return Mutation::Delete();
        }
        if (!Deleting(next) || m.value("deletionGracePeriodSeconds", int64_t{0}) > grace) {
          m["deletionTimestamp"] = NowRfc3339(grace);
          m["deletionGracePeriodSeconds"] = grace;
          if (!Deleting(*cur)) m["generation"] = m.value("generation", int64_t{1}) + 1;
        }
        if (opts.dry_run || next == *cur) return Mutation::None();
        return Mutation::Put(std::move(next));
      });
  if (!r.ok()) return r.status();
  out.object = ForVersion(t, *r);
  if (!opts.dry_run) AfterWrite(t, *r, out.removed);
  return out;
}

void ObjectOps::AfterWrite(const ResourceType& t, const json& obj, bool removed) {
  if (t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions") {
    const std::string name = MetaStr(obj, "name");
    if (removed) {
      // Drop every instance (finalizers on CRs do not block CRD removal here).
      auto types = Registry::TypesFromCrd(obj);
      if (types.ok() && !types->empty()) {
        const std::string key = (*types)[0].storage_key();
        for (auto& [res, o] : store_->Snapshot(key)) {
          (void)store_->Mutate(res, MetaStr(o, "namespace"), MetaStr(o, "name"),
                               [](const std::optional<json>& cur) -> StatusOr<Mutation> {
                                 return cur ? Mutation::Delete() : Mutation::None();
                               });
        }
      }
      registry_->RemoveCrd(name);
    } else {
      auto types = Registry::TypesFromCrd(obj);
      if (types.ok()) registry_->SetCrd(name, std::move(*types));
    }
  }
  if ((removed || Deleting(obj)) && on_delete_) on_delete_();
}

void ObjectOps::LoadCrds() {
  for (auto& [res, obj] : store_->Snapshot("apiextensions.k8s.io/customresourcedefinitions")) {
    auto types = Registry::TypesFromCrd(obj);
    if (types.ok()) registry_->SetCrd(MetaStr(obj, "name"), std::move(*types));
  }
}

Status ObjectOps::EnsureDefaultNamespaces() {
  auto t = registry_->Find("", "v1", "namespaces");
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    if (store_->Get(kNamespaces, "", ns)) continue;
    auto r = Create(*t, "", json{{"metadata", {{"name", ns}}}}, {}, nullptr);
    if (!r.ok() && Reason(r.status()) != "AlreadyExists") return r.status();
  }
  return Status();
}

}  // namespace kubelocal
