#include "localcluster/apiserver/admission.h"

#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "localcluster/apiserver/object_meta.h"
#include "kube/openapi_schema.h"

namespace kubelocal {
namespace {

// Allocates service cluster IPs from 10.96.0.0/16 (pseudo-random, collision-checked by caller).
std::string RandomClusterIp() {
  unsigned char b[2];
  RAND_bytes(b, sizeof(b));
  int x = b[0], y = b[1] == 0 ? 1 : b[1];
  if (x == 0 && y == 1) y = 2;  // 10.96.0.1 is the kubernetes service
  return "10.96." + std::to_string(x) + "." + std::to_string(y);
}

// Names (unique, required), images (required on create) and the defaults the
// API server fills into each container.
void AdmitContainers(json& spec, bool create, std::vector<FieldCause>* causes) {
  if (!spec.contains("containers") || !spec["containers"].is_array() || spec["containers"].empty()) {
    causes->push_back({"FieldValueRequired", "spec.containers", "Required value"});
    return;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < spec["containers"].size(); ++i) {
    json& c = spec["containers"][i];
    const std::string p = "spec.containers[" + std::to_string(i) + "]";
    if (!c.is_object() || c.value("name", "").empty()) {
      causes->push_back({"FieldValueRequired", p + ".name", "Required value"});
    } else if (!names.insert(c["name"].get<std::string>()).second) {
      causes->push_back({"FieldValueDuplicate", p + ".name", "Duplicate value: " + c["name"].dump()});
    }
    if (!c.is_object()) continue;
    if (c.value("image", "").empty() && create) {
      causes->push_back({"FieldValueRequired", p + ".image", "Required value"});
    }
    if (!c.contains("terminationMessagePath")) c["terminationMessagePath"] = "/dev/termination-log";
    if (!c.contains("imagePullPolicy")) c["imagePullPolicy"] = "IfNotPresent";
    if (c.contains("ports") && c["ports"].is_array()) {
      for (auto& port : c["ports"]) {
        if (port.is_object() && !port.contains("protocol")) port["protocol"] = "TCP";
      }
    }
  }
}

// Pod specs are immutable except images, deadlines, added tolerations, the
// grace period, scheduling gates (removal only) and (leniently, for local
// schedulers) nodeName set once.
void CheckPodUpdate(const json& old_spec, const json& spec, std::vector<FieldCause>* causes) {
  json a = old_spec, b = spec;
  for (json* s : {&a, &b}) {
    for (const char* list : {"containers", "initContainers"}) {
      if (s->contains(list) && (*s)[list].is_array()) {
        for (auto& c : (*s)[list]) {
          if (c.is_object()) c.erase("image");
        }
      }
    }
    s->erase("activeDeadlineSeconds");
    s->erase("tolerations");
    s->erase("terminationGracePeriodSeconds");
  }
  if (a.value("nodeName", "").empty()) {
    a.erase("nodeName");
    b.erase("nodeName");
  }
  // Scheduling gates may only be removed (Kubernetes 1.27+, PodSchedulingReadiness):
  // how Kueue releases an admitted pod group.
  const json old_gates = a.value("schedulingGates", json::array());
  const json new_gates = b.value("schedulingGates", json::array());
  bool gates_removed_only = new_gates.is_array() && old_gates.is_array();
  for (const json& g : gates_removed_only ? new_gates : json::array()) {
    gates_removed_only = gates_removed_only && std::find(old_gates.begin(), old_gates.end(), g) != old_gates.end();
  }
  if (gates_removed_only) {
    a.erase("schedulingGates");
    b.erase("schedulingGates");
  } else if (old_gates != new_gates) {
    causes->push_back({"FieldValueForbidden", "spec.schedulingGates",
                       "Forbidden: only deletion is allowed, but found new scheduling gate"});
  }
  if (a != b) {
    causes->push_back({"FieldValueForbidden", "spec",
                       "Forbidden: pod updates may not change fields other than "
                       "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                       "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                       "to existing tolerations), `spec.terminationGracePeriodSeconds`, "
                       "`spec.schedulingGates` (only deletions)"});
  }
}

}  // namespace

Status AdmitCustomResource(const json& schema, const std::string& field_validation, json& obj,
                           std::vector<std::string>* warnings, std::vector<FieldCause>* causes) {
  if (schema.is_null()) return Status();
  namespace openapi = hypertrain::kube::openapi;
  auto pruned = openapi::PruneUnknownFields(obj, schema);
  if (!pruned.empty() && field_validation == "Strict") {
    std::string msg = "strict decoding error: ";
    for (size_t i = 0; i < pruned.size(); ++i) {
      msg += (i ? ", " : "") + std::string("unknown field \"") + pruned[i] + "\"";
    }
    return BadRequest(msg);
  }
  if (!pruned.empty() && field_validation == "Warn" && warnings) {
    for (const auto& p : pruned) warnings->push_back("unknown field \"" + p + "\"");
  }
  openapi::ApplyDefaults(obj, schema);
  auto c = openapi::Validate(obj, schema);
  causes->insert(causes->end(), c.begin(), c.end());
  return Status();
}

void AdmitPod(json& obj, const json& old, std::vector<FieldCause>* causes) {
  json& spec = obj["spec"];
  if (!spec.is_object()) spec = json::object();
  AdmitContainers(spec, old.is_null(), causes);
  if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
  if (!spec.contains("terminationGracePeriodSeconds")) spec["terminationGracePeriodSeconds"] = 30;
  if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
  if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
  const std::string rp = spec.value("restartPolicy", "");
  if (rp != "Always" && rp != "OnFailure" && rp != "Never") {
    causes->push_back({"FieldValueNotSupported", "spec.restartPolicy",
                       "Unsupported value: \"" + rp + "\": supported values: \"Always\", \"OnFailure\", \"Never\""});
  }
  if (!old.is_null()) CheckPodUpdate(old.value("spec", json::object()), spec, causes);
}

void AdmitService(json& obj, const json& old, std::vector<FieldCause>* causes) {
  json& spec = obj["spec"];
  if (!spec.is_object()) spec = json::object();
  if (!spec.contains("type")) spec["type"] = "ClusterIP";
  if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
  if (!old.is_null() && old.contains("/spec/clusterIP"_json_pointer)) {
    const json& oldip = old["spec"]["clusterIP"];
    if (!spec.contains("clusterIP") || spec["clusterIP"] == "") {
      spec["clusterIP"] = oldip;
    } else if (spec["clusterIP"] != oldip) {
      causes->push_back({"FieldValueInvalid", "spec.clusterIP",
                         "Invalid value: " + spec["clusterIP"].dump() + ": field is immutable"});
    }
  }
  if (!spec.contains("clusterIP") || spec["clusterIP"] == "") spec["clusterIP"] = RandomClusterIp();
  spec["clusterIPs"] = json::array({spec["clusterIP"]});
  if (!spec.contains("ports") || !spec["ports"].is_array()) {
    if (spec["clusterIP"] != "None") causes->push_back({"FieldValueRequired", "spec.ports", "Required value"});
    return;
  }
  for (size_t i = 0; i < spec["ports"].size(); ++i) {
    json& p = spec["ports"][i];
    if (!p.is_object() || !p.contains("port") || !p["port"].is_number_integer()) {
      causes->push_back({"FieldValueRequired", "spec.ports[" + std::to_string(i) + "].port", "Required value"});
      continue;
    }
    if (!p.contains("protocol")) p["protocol"] = "TCP";
    if (!p.contains("targetPort")) p["targetPort"] = p["port"];
  }
}

void AdmitNamespace(json& obj) {
  if (!obj.contains("/spec/finalizers"_json_pointer)) obj["spec"]["finalizers"] = {"kubernetes"};
  if (!obj.contains("/status/phase"_json_pointer)) obj["status"]["phase"] = "Active";
}

Status AdmitCrd(json& obj, const std::vector<ResourceType>& registered, std::vector<FieldCause>* causes) {
  auto types = Registry::TypesFromCrd(obj);
  if (!types.ok()) return types.status();
  const size_t before = causes->size();
  const json versions = obj["spec"]["versions"];
  for (size_t i = 0; i < versions.size(); ++i) {
    const std::string p = "spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema";
    if (versions[i].contains("/schema/openAPIV3Schema"_json_pointer)) {
      auto c = hypertrain::kube::openapi::CheckStructural(versions[i]["schema"]["openAPIV3Schema"], p);
      causes->insert(causes->end(), c.begin(), c.end());
    }
  }
  // Names must not clash with a built-in or another CRD.
  for (const auto& other : registered) {
    if (other.group == obj["spec"]["group"] && other.plural == obj["spec"]["names"]["plural"] &&
        other.crd_name != MetaStr(obj, "name")) {
      causes->push_back({"FieldValueDuplicate", "spec.names.plural",
                         "Duplicate value: " + obj["spec"]["names"]["plural"].dump()});
      break;
    }
  }
  if (causes->size() != before) return Status();
  json names = obj["spec"]["names"];
  if (!names.contains("singular")) names["singular"] = (*types)[0].singular;
  if (!names.contains("listKind")) names["listKind"] = names.value("kind", "") + "List";
  std::string storage;
  for (const auto& v : versions) {
    if (v.value("storage", false)) storage = v.value("name", "");
  }
  json status = obj.value("status", json::object());
  status["acceptedNames"] = names;
  status["storedVersions"] = json::array({storage});
  const std::string now = NowRfc3339();
  status["conditions"] = {{{"type", "NamesAccepted"}, {"status", "True"}, {"reason", "NoConflicts"},
                           {"message", "no conflicts found"}, {"lastTransitionTime", now}},
                          {{"type", "Established"}, {"status", "True"}, {"reason", "InitialNamesAccepted"},
                           {"message", "the initial names have been accepted"}, {"lastTransitionTime", now}}};
  obj["status"] = status;
  return Status();
}

}  // namespace kubelocal
