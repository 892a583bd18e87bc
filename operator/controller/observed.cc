#include "operator/controller/observed.h"

#include <algorithm>
#include <cctype>

#include "contract/pod.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using nlohmann::json;

const json& Field(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string Str(const json& obj, const char* key, const std::string& fallback = "") {
  const json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

std::map<std::string, std::string> StringMap(const json& obj) {
  std::map<std::string, std::string> out;
  if (!obj.is_object()) return out;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// A label holding a small non-negative integer, else -1.
int IntLabel(const json& labels, const char* key) {
  const std::string v = Str(labels, key);
  if (v.empty() || v.size() > 9 || !std::all_of(v.begin(), v.end(), ::isdigit)) return -1;
  return std::stoi(v);
}

PodFault FaultOf(const json& status) {
  PodFault f;
  if (Str(status, "reason") == "Evicted") {
    f.reason = api::reason::kPodEvicted;
    f.message = Str(status, "message", "evicted");
    return f;
  }
  const json& statuses = Field(status, "containerStatuses");
  for (const json& cs : statuses.is_array() ? statuses : json::array()) {
    if (Str(cs, "name") != kContainerName) continue;
    const json& term = Field(Field(cs, "state"), "terminated");
    const json& code = Field(term, "exitCode");
    if (code.is_number_integer()) f.exit_code = code.get<int>();
    f.message = Str(term, "message", Str(term, "reason"));
    f.finished_at = Str(term, "finishedAt");
  }
  if (f.message.empty()) f.message = Str(status, "message", Str(status, "reason"));
  // kubelet reports the termination log verbatim (the launcher ends it with a newline).
  while (!f.message.empty() && std::isspace(static_cast<unsigned char>(f.message.back()))) f.message.pop_back();
  return f;
}

}  // namespace

ObservedObject ObjectFromJson(const json& obj) {
  ObservedObject o;
  const json& meta = Field(obj, "metadata");
  o.kind = Str(obj, "kind");
  o.name = Str(meta, "name");
  o.uid = Str(meta, "uid");
  o.deleting = meta.is_object() && meta.contains("deletionTimestamp");
  const json& refs = Field(meta, "ownerReferences");
  for (const json& r : refs.is_array() ? refs : json::array()) {
    if (Field(r, "controller") != true) continue;
    o.controller_kind = Str(r, "kind");
    o.controller_name = Str(r, "name");
    o.controller_uid = Str(r, "uid");
    break;
  }
  const json& finalizers = Field(meta, "finalizers");
  for (const json& f : finalizers.is_array() ? finalizers : json::array()) {
    if (f.is_string()) o.finalizers.push_back(f.get<std::string>());
  }
  o.job_label = Str(Field(meta, "labels"), contract::kLabelJobName);
  return o;
}

Ownership OwnershipOf(const ObservedObject& o, const std::string& job_name, const std::string& job_uid) {
  if (o.controller_kind == api::kKind && !job_uid.empty() && o.controller_uid == job_uid) return Ownership::kOurs;
  if (o.controller_kind == api::kKind && o.controller_name == job_name) return Ownership::kEarlierJob;
  return Ownership::kForeign;
}

std::string DescribeOwner(const ObservedObject& o) {
  std::string who = o.controller_uid.empty()
                        ? "no controller ownerReference"
                        : "controlled by " + o.controller_kind + " " + o.controller_name + ", uid " + o.controller_uid;
  return o.kind + " " + o.name + " (" + who + ")";
}

ObservedPod PodFromJson(const json& pod) {
  ObservedPod p;
  const json& meta = Field(pod, "metadata");
  const json& labels = Field(meta, "labels");
  const json& status = Field(pod, "status");
  p.name = Str(meta, "name");
  p.uid = Str(meta, "uid");
  p.node_rank = IntLabel(labels, contract::kLabelNodeRank);
  p.restart_attempt = IntLabel(labels, contract::kLabelRestartAttempt);
  p.phase = Str(status, "phase", "Pending");
  p.deleting = meta.is_object() && meta.contains("deletionTimestamp");
  p.node_name = Str(Field(pod, "spec"), "nodeName");
  const json& gates = Field(Field(pod, "spec"), "schedulingGates");
  p.gated = gates.is_array() && !gates.empty();
  const json& conditions = Field(status, "conditions");
  for (const json& c : conditions.is_array() ? conditions : json::array()) {
    if (Str(c, "type") == "PodScheduled" && Str(c, "status") == "False") p.unschedulable_message = Str(c, "message");
  }
  p.fault = FaultOf(status);
  p.final_in_group = Str(Field(meta, "annotations"), gang::kKueueRetriableInGroup) == "false";
  return p;
}

ObservedNode NodeFromJson(const json& node) {
  ObservedNode n;
  const json& meta = Field(node, "metadata");
  n.name = Str(meta, "name");
  n.labels = StringMap(Field(meta, "labels"));
  const json& conditions = Field(Field(node, "status"), "conditions");
  for (const json& c : conditions.is_array() ? conditions : json::array()) {
    if (Str(c, "type") != "Ready" || Str(c, "status") == "True") continue;
    n.not_ready_since = Str(c, "lastTransitionTime");
    break;
  }
  const json& spec = Field(node, "spec");
  n.unschedulable = Field(spec, "unschedulable") == true;
  const json& taints = Field(spec, "taints");
  for (const json& t : taints.is_array() ? taints : json::array()) {
    n.taints.push_back(NodeTaint{Str(t, "key"), Str(t, "value"), Str(t, "effect")});
  }
  n.allocatable = StringMap(Field(Field(node, "status"), "allocatable"));
  return n;
}

}  // namespace hypertrain::controller
