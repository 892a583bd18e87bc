#include "localcluster/apiserver/resources.h"

#include <algorithm>
#include <set>

namespace kubelocal {
namespace {

ResourceType T(std::string group, std::string plural, std::string singular, std::string kind,
               bool namespaced, std::vector<std::string> shorts, bool status,
               std::vector<std::string> categories = {},
               std::vector<std::string> fields = {}) {
  ResourceType t;
  t.group = std::move(group);
  t.version = "v1";
  t.plural = std::move(plural);
  t.singular = std::move(singular);
  t.kind = std::move(kind);
  t.namespaced = namespaced;
  t.short_names = std::move(shorts);
  t.has_status = status;
  t.categories = std::move(categories);
  t.field_selectors = std::move(fields);
  return t;
}

const std::vector<std::string> kVerbs = {"create", "delete", "deletecollection", "get",
                                         "list",   "patch",  "update",           "watch"};

json ResourceEntry(const ResourceType& t) {
  json r = {{"name", t.plural},         {"singularName", t.singular}, {"namespaced", t.namespaced},
            {"kind", t.kind},           {"verbs", kVerbs}};
  if (!t.short_names.empty()) r["shortNames"] = t.short_names;
  if (!t.categories.empty()) r["categories"] = t.categories;
  return r;
}

FieldCause Required(const std::string& field) {
  return {"FieldValueRequired", field, "Required value"};
}
FieldCause BadValue(const std::string& field, const json& v, const std::string& why) {
  return {"FieldValueInvalid", field, "Invalid value: " + v.dump() + ": " + why};
}

// A CRD version's printer columns; what is missing or unsupported goes to causes.
std::vector<PrinterColumn> PrinterColumns(const json& cols, const std::string& p, std::vector<FieldCause>* causes) {
  static const std::set<std::string> kTypes = {"integer", "number", "string", "boolean", "date"};
  std::vector<PrinterColumn> out;
  for (size_t c = 0; c < cols.size(); ++c) {
    const std::string cp = p + ".additionalPrinterColumns[" + std::to_string(c) + "]";
    PrinterColumn pc;
    pc.name = cols[c].value("name", "");
    pc.type = cols[c].value("type", "");
    pc.format = cols[c].value("format", "");
    pc.description = cols[c].value("description", "");
    pc.priority = cols[c].value("priority", 0);
    pc.json_path = cols[c].value("jsonPath", cols[c].value("JSONPath", ""));
    if (pc.name.empty()) causes->push_back(Required(cp + ".name"));
    if (pc.json_path.empty()) causes->push_back(Required(cp + ".jsonPath"));
    if (!kTypes.count(pc.type)) {
      causes->push_back(FieldCause{"FieldValueNotSupported", cp + ".type",
                                   "Unsupported value: \"" + pc.type +
                                       "\": supported values: \"boolean\", \"date\", \"integer\", "
                                       "\"number\", \"string\""});
    }
    out.push_back(pc);
  }
  return out;
}

// The version's schema (or the spec-wide one of older CRDs); it must be there
// and describe an object.
const json* VersionSchema(const json& spec, const json& v, const std::string& p, std::vector<FieldCause>* causes) {
  const json* schema = nullptr;
  if (v.contains("schema") && v["schema"].contains("openAPIV3Schema")) {
    schema = &v["schema"]["openAPIV3Schema"];
  } else if (spec.contains("validation") && spec["validation"].contains("openAPIV3Schema")) {
    schema = &spec["validation"]["openAPIV3Schema"];
  }
  if (!schema) {
    causes->push_back(
        FieldCause{"FieldValueRequired", p + ".schema.openAPIV3Schema", "Required value: schemas are required"});
  } else if (!schema->is_object() || (schema->contains("type") && (*schema)["type"] != "object")) {
    causes->push_back(
        BadValue(p + ".schema.openAPIV3Schema.type", schema->value("type", json()), "must be object at the root"));
  }
  return schema;
}

// Group, names and scope of a CRD.
void CheckCrdNames(const std::string& name, const json& spec, std::vector<FieldCause>* causes) {
  const std::string group = spec.value("group", "");
  const json names = spec.value("names", json::object());
  const std::string plural = names.value("plural", "");
  const std::string scope = spec.value("scope", "");
  if (group.empty()) causes->push_back(Required("spec.group"));
  if (plural.empty()) causes->push_back(Required("spec.names.plural"));
  if (names.value("kind", "").empty()) causes->push_back(Required("spec.names.kind"));
  if (scope != "Namespaced" && scope != "Cluster") {
    causes->push_back(FieldCause{"FieldValueNotSupported", "spec.scope",
                                 "Unsupported value: \"" + scope + "\": supported values: \"Cluster\", \"Namespaced\""});
  }
  if (!plural.empty() && !group.empty() && name != plural + "." + group) {
    causes->push_back(BadValue("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
  }
  for (const char* f : {"plural", "singular"}) {
    const std::string v = names.value(f, "");
    std::string lower = v;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (v != lower) causes->push_back(BadValue(std::string("spec.names.") + f, v, "must be lowercase"));
  }
}

}  // namespace

Registry::Registry() {
  Add(T("", "namespaces", "namespace", "Namespace", false, {"ns"}, true, {},
        {"status.phase"}));
  Add(T("", "pods", "pod", "Pod", true, {"po"}, true, {"all"},
        {"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
         "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"}));
  Add(T("", "services", "service", "Service", true, {"svc"}, true, {"all"}));
  Add(T("", "events", "event", "Event", true, {"ev"}, false, {},
        {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
         "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
         "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}));
  Add(T("", "nodes", "node", "Node", false, {"no"}, true, {}, {"spec.unschedulable"}));
  Add(T("", "configmaps", "configmap", "ConfigMap", true, {"cm"}, false));
  Add(T("", "secrets", "secret", "Secret", true, {}, false, {}, {"type"}));
  Add(T("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, {"sa"}, false));
  Add(T("", "endpoints", "endpoints", "Endpoints", true, {"ep"}, false));
  Add(T("coordination.k8s.io", "leases", "lease", "Lease", true, {}, false));
  // Stored, not enforced: kube-local authorizes every authenticated user.
  Add(T("rbac.authorization.k8s.io", "roles", "role", "Role", true, {}, false));
  Add(T("rbac.authorization.k8s.io", "rolebindings", "rolebinding", "RoleBinding", true, {}, false));
  Add(T("apiextensions.k8s.io", "customresourcedefinitions", "customresourcedefinition",
        "CustomResourceDefinition", false, {"crd", "crds"}, true, {"api-extensions"}));
}

void Registry::Add(ResourceType t) { builtins_.push_back(std::move(t)); }

std::optional<ResourceType> Registry::Find(const std::string& group, const std::string& version,
                                           const std::string& plural) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  for (const auto& t : builtins_) {
    if (t.group == group && t.version == version && t.plural == plural) return t;
  }
  for (const auto& [name, types] : crds_) {
    for (const auto& t : types) {
      if (t.group == group && t.version == version && t.plural == plural) return t;
    }
  }
  return std::nullopt;
}

std::vector<ResourceType> Registry::All() const {
  std::shared_lock<std::shared_mutex> l(mu_);
  std::vector<ResourceType> out = builtins_;
  for (const auto& [name, types] : crds_) out.insert(out.end(), types.begin(), types.end());
  return out;
}

StatusOr<std::vector<ResourceType>> Registry::TypesFromCrd(const json& crd) {
  std::vector<FieldCause> causes;
  const std::string name = crd.value("/metadata/name"_json_pointer, std::string());
  const json spec = crd.value("spec", json::object());
  const json names = spec.value("names", json::object());
  CheckCrdNames(name, spec, &causes);
  const json versions = spec.value("versions", json::array());
  if (!versions.is_array() || versions.empty()) causes.push_back(Required("spec.versions"));
  int storage = 0;
  std::vector<ResourceType> out;
  std::set<std::string> seen;
  for (size_t i = 0; versions.is_array() && i < versions.size(); ++i) {
    const json& v = versions[i];
    const std::string p = "spec.versions[" + std::to_string(i) + "]";
    std::string vname = v.value("name", "");
    if (vname.empty()) causes.push_back(Required(p + ".name"));
    if (!seen.insert(vname).second) causes.push_back({"FieldValueDuplicate", p + ".name", "Duplicate value: \"" + vname + "\""});
    if (v.value("storage", false)) ++storage;
    const json* schema = VersionSchema(spec, v, p, &causes);
    if (!v.value("served", false)) continue;
    ResourceType t;
    t.group = spec.value("group", "");
    t.version = vname;
    t.plural = names.value("plural", "");
    t.kind = names.value("kind", "");
    t.singular = names.value("singular", "");
    if (t.singular.empty()) {
      t.singular = t.kind;
      std::transform(t.singular.begin(), t.singular.end(), t.singular.begin(), ::tolower);
    }
    t.namespaced = spec.value("scope", "") == "Namespaced";
    t.short_names = names.value("shortNames", std::vector<std::string>{});
    t.categories = names.value("categories", std::vector<std::string>{});
    t.is_crd = true;
    t.crd_name = name;
    if (v.contains("subresources") && v["subresources"].contains("status")) t.has_status = true;
    if (spec.contains("subresources") && spec["subresources"].contains("status")) t.has_status = true;
    if (schema) t.schema = *schema;
    t.columns = PrinterColumns(v.value("additionalPrinterColumns", spec.value("additionalPrinterColumns", json::array())),
                               p, &causes);
    out.push_back(std::move(t));
  }
  if (versions.is_array() && !versions.empty() && storage != 1) {
    causes.push_back(FieldCause{"FieldValueInvalid", "spec.versions",
                                "Invalid value: " + versions.dump().substr(0, 80) +
                                    ": must have exactly one version marked as storage version"});
  }
  if (!causes.empty()) return Invalid("CustomResourceDefinition.apiextensions.k8s.io", name, causes);
  return out;
}

void Registry::SetCrd(const std::string& crd_name, std::vector<ResourceType> types) {
  std::unique_lock<std::shared_mutex> l(mu_);
  crds_[crd_name] = std::move(types);
}

void Registry::RemoveCrd(const std::string& crd_name) {
  std::unique_lock<std::shared_mutex> l(mu_);
  crds_.erase(crd_name);
}

json Registry::ApiVersions(const std::string& server_address) const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

json Registry::ApiGroupList() const {
  auto all = All();
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> versions;
  for (const auto& t : all) {
    if (t.group.empty()) continue;
    if (!versions.count(t.group)) order.push_back(t.group);
    auto& vs = versions[t.group];
    if (std::find(vs.begin(), vs.end(), t.version) == vs.end()) vs.push_back(t.version);
  }
  json groups = json::array();
  for (const auto& g : order) {
    json vs = json::array();
    for (const auto& v : versions[g]) vs.push_back({{"groupVersion", g + "/" + v}, {"version", v}});
    groups.push_back({{"name", g}, {"versions", vs}, {"preferredVersion", vs[0]}});
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<json> Registry::ApiGroup(const std::string& group) const {
  json list = ApiGroupList();
  for (auto& g : list["groups"]) {
    if (g["name"] == group) {
      g["kind"] = "APIGroup";
      g["apiVersion"] = "v1";
      return g;
    }
  }
  return std::nullopt;
}

std::optional<json> Registry::ApiResourceList(const std::string& group,
                                              const std::string& version) const {
  json resources = json::array();
  bool found = false;
  for (const auto& t : All()) {
    if (t.group != group || t.version != version) continue;
    found = true;
    resources.push_back(ResourceEntry(t));
    if (t.has_status) {
      resources.push_back({{"name", t.plural + "/status"},
                           {"singularName", ""},
                           {"namespaced", t.namespaced},
                           {"kind", t.kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
  }
  if (!found) return std::nullopt;
  return json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", resources}};
}

}  // namespace kubelocal
