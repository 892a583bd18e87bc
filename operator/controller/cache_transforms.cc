#include "operator/controller/cache_transforms.h"

#include <initializer_list>

namespace hypertrain::controller {
namespace {

using kube::Json;

// Keeps only `keys` of obj[field] (an object); drops the field when it is not one.
void KeepKeys(Json& obj, const char* field, std::initializer_list<const char*> keys) {
  auto it = obj.find(field);
  if (it == obj.end()) return;
  if (!it->is_object()) {
    obj.erase(it);
    return;
  }
  Json kept = Json::object();
  for (const char* k : keys) {
    if (auto v = it->find(k); v != it->end()) kept[k] = std::move(*v);
  }
  *it = std::move(kept);
}

void TrimMetadata(Json& obj) {
  KeepKeys(obj, "metadata",
           {"name", "namespace", "uid", "resourceVersion", "generation", "labels", "annotations", "ownerReferences",
            "finalizers", "deletionTimestamp", "creationTimestamp"});
}

}  // namespace

void TrimPod(Json& pod) {
  if (!pod.is_object()) return;
  TrimMetadata(pod);
  KeepKeys(pod, "spec", {"nodeName", "schedulingGates"});
  KeepKeys(pod, "status", {"phase", "reason", "message", "conditions", "containerStatuses"});
  // Of each container status, what a fault is read from.
  if (auto st = pod.find("status"); st != pod.end()) {
    if (auto cs = st->find("containerStatuses"); cs != st->end() && cs->is_array()) {
      for (Json& c : *cs) {
        if (!c.is_object()) continue;
        Json kept = Json::object();
        for (const char* k : {"name", "state", "ready", "restartCount"}) {
          if (auto v = c.find(k); v != c.end()) kept[k] = std::move(*v);
        }
        c = std::move(kept);
      }
    }
  }
}

void TrimNode(Json& node) {
  if (!node.is_object()) return;
  KeepKeys(node, "metadata", {"name", "uid", "resourceVersion", "labels", "deletionTimestamp"});
  KeepKeys(node, "spec", {"unschedulable", "taints"});
  KeepKeys(node, "status", {"conditions", "allocatable"});
  if (auto st = node.find("status"); st != node.end()) {
    if (auto cs = st->find("conditions"); cs != st->end() && cs->is_array()) {
      for (Json& c : *cs) {
        if (c.is_object()) c.erase("lastHeartbeatTime");
      }
    }
  }
}

void KeepMetadataOnly(Json& obj) {
  if (!obj.is_object()) return;
  Json kept = Json::object();
  for (const char* k : {"apiVersion", "kind", "metadata"}) {
    if (auto v = obj.find(k); v != obj.end()) kept[k] = std::move(*v);
  }
  obj = std::move(kept);
  TrimMetadata(obj);
}

}  // namespace hypertrain::controller
