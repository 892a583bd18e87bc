#pragma once
// What the reconciler observed, as plain structs: the job's pods and the nodes
// they run on, read from the informer caches. PodFromJson and NodeFromJson are
// the only code that reads their JSON; the fault classification (faults.h) and
// the decision (plan.h) work on these, so they are tested without a server.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/status.h"

namespace hypertrain::controller {

using Clock = std::chrono::system_clock;

// What the kubelet reported about a failed pod: the trainer container's exit
// code and termination message, or the pod's own reason (eviction).
struct PodFault {
  std::string reason = api::reason::kPodFailed;  // or kPodEvicted
  std::string message;
  std::optional<int> exit_code;
  std::string finished_at;  // the container's RFC 3339 finishedAt, "" if unknown

  bool operator==(const PodFault&) const = default;
};

struct ObservedPod {
  std::string name;
  std::string uid;
  int node_rank = -1;        // label hypertrain.dev/node-rank; -1 when absent or not a number
  int restart_attempt = -1;  // label hypertrain.dev/restart-attempt; likewise
  std::string phase = "Pending";
  bool deleting = false;   // metadata.deletionTimestamp is set
  std::string node_name;   // spec.nodeName, "" while unscheduled
  bool gated = false;      // spec.schedulingGates is not empty (e.g. waiting for Kueue)
  // The PodScheduled=False condition's message ("0/4 nodes are available: ..."),
  // "" when the pod is scheduled or the scheduler has not said why not.
  std::string unschedulable_message;
  PodFault fault;          // read whatever the phase; used when Failed
  bool final_in_group = false;  // annotation kueue.x-k8s.io/retriable-in-group: "false"

  bool Failed() const { return phase == "Failed"; }
  bool Terminated() const { return phase == "Succeeded" || phase == "Failed"; }
};

struct NodeTaint {
  std::string key, value, effect;
  bool operator==(const NodeTaint&) const = default;
};

struct ObservedNode {
  std::string name;
  std::map<std::string, std::string> labels;
  // The Ready condition's lastTransitionTime ("" when missing) while that
  // condition is not True; nullopt when the node is Ready or reports nothing.
  std::optional<std::string> not_ready_since;
  bool unschedulable = false;  // spec.unschedulable (cordoned)
  std::vector<NodeTaint> taints;
  std::map<std::string, std::string> allocatable;  // status.allocatable quantities
};

// An object under one of the job's names (builders.h: Service, ConfigMaps,
// ServiceAccount, Role, RoleBinding, pods) and who controls it: the job uses
// it only when its controller ownerReference carries the job's UID.
struct ObservedObject {
  std::string kind;  // "Service", "ConfigMap", "Pod", ...
  std::string name;
  std::string uid;
  // The controller ownerReference; all "" when there is none.
  std::string controller_kind, controller_name, controller_uid;
  bool deleting = false;                // metadata.deletionTimestamp is set
  std::vector<std::string> finalizers;  // metadata.finalizers
  std::string job_label;                // label hypertrain.dev/job-name, "" when absent

  bool operator==(const ObservedObject&) const = default;
};

// Whose an object under the job's name is.
enum class Ownership {
  kOurs,         // controller ownerReference with the job's UID
  kEarlierJob,   // controlled by a TrainingJob of the same name, another UID: one
                 // deleted before (the garbage collector removes its objects)
  kForeign,      // anything else (no controller, another controller): never used
};
Ownership OwnershipOf(const ObservedObject& o, const std::string& job_name, const std::string& job_uid);
// "Role ops-progress (no controller ownerReference)", "ConfigMap web-config
// (controlled by Deployment web, uid 1234)".
std::string DescribeOwner(const ObservedObject& o);

// Objects (any kind), pods and nodes (core/v1 JSON) as plain structs. Fields
// that are absent or of the wrong type read as their defaults.
ObservedObject ObjectFromJson(const nlohmann::json& obj);
ObservedPod PodFromJson(const nlohmann::json& pod);
ObservedNode NodeFromJson(const nlohmann::json& node);

}  // namespace hypertrain::controller
