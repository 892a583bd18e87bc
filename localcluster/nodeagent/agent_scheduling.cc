// The node agent's own scheduler (--bind-pods, on kube-local): binds pods to
// the simulated nodes, a gang's PodGroup all at once or not at all, admits
// Kueue pod groups that fit, and reports why a pod stays Pending.
#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include "core/time.h"
#include "localcluster/nodeagent/agent.h"

namespace hypertrain::nodeagent {
namespace {

using kube::Json;

std::string Now() { return FormatRfc3339(std::chrono::system_clock::now()); }

std::string S(const Json& j, const Json::json_pointer& p) {
  return j.contains(p) && j[p].is_string() ? j[p].get<std::string>() : "";
}

}  // namespace

bool Agent::Bind(const Json& pod, const std::string& node) {
  const std::string ns = S(pod, "/metadata/namespace"_json_pointer);
  const std::string name = S(pod, "/metadata/name"_json_pointer);
  kube::Request r;
  r.method = "POST";
  r.path = "/api/v1/namespaces/" + ns + "/pods/" + name + "/binding";
  r.body = Json{{"apiVersion", "v1"},
                {"kind", "Binding"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}}
               .dump();
  auto res = client_->Send(r);
  if (!res.ok()) {
    spdlog::warn("bind {}/{} to {}: {}", ns, name, node, res.status().ToString());
    return false;
  }
  spdlog::info("bound {}/{} to {}", ns, name, node);
  return true;
}

void Agent::ReportPending(const Json& pod, const std::string& reason, const std::string& message) {
  if (S(pod, "/status/message"_json_pointer) == message) return;
  Json cond = {{"type", "PodScheduled"}, {"status", "False"}, {"reason", reason},
               {"message", message}, {"lastTransitionTime", Now()}};
  const std::string ns = S(pod, "/metadata/namespace"_json_pointer);
  const std::string name = S(pod, "/metadata/name"_json_pointer);
  spdlog::info("{}/{} pending ({}): {}", ns, name, reason, message);
  auto r = pods_.InNamespace(ns).PatchStatus(
      name, {{"status", {{"phase", "Pending"}, {"message", message}, {"conditions", Json::array({cond})}}}});
  if (!r.ok() && !kube::IsNotFound(r.status())) spdlog::warn("status of {}/{}: {}", ns, name, r.status().ToString());
}

void Agent::Schedule(const Json& pod, Placement* placement) {
  std::string reasons;
  const std::string node = placement->Pick(pod, &reasons);
  if (!node.empty()) {
    if (Bind(pod, node)) placement->Place(pod, node);
    return;
  }
  ReportPending(pod, "Unschedulable",
                "0/" + std::to_string(placement->node_count()) + " nodes are available: " + reasons);
}

void Agent::ScheduleGang(const GangRef& gang, const std::vector<const Json*>& members, Placement* placement) {
  const auto slash = gang.api_version.find('/');
  kube::ResourceClient groups(client_,
                              kube::resources::Custom(gang.api_version.substr(0, slash),
                                                      gang.api_version.substr(slash + 1), "podgroups", "PodGroup"),
                              gang.ns);
  auto pg = groups.Get(gang.name);
  std::string message;
  if (!pg.ok()) {
    message = "PodGroup " + gang.name + " (" + gang.api_version + "): " + pg.status().message();
  } else {
    const int min_member = pg->value("spec", Json::object()).value("minMember", 1);
    if (static_cast<int>(members.size()) < min_member) {
      message = "gang " + gang.name + ": " + std::to_string(members.size()) + " of minMember " +
                std::to_string(min_member) + " pods pending";
    } else {
      std::string why;
      const std::vector<std::string> nodes = placement->PlaceAll(members, &why);
      if (!nodes.empty()) {
        for (size_t i = 0; i < members.size(); ++i) Bind(*members[i], nodes[i]);
        return;
      }
      message = "gang " + gang.name + " of " + std::to_string(members.size()) + " pods does not fit at once: " + why;
    }
  }
  for (const Json* m : members) ReportPending(*m, "Unschedulable", message);
}

void Agent::AdmitPodGroups(const std::vector<Json>& pods, Placement placement) {
  // Groups admitted before whose pods wait to be bound hold their room first
  // (Kueue keeps an admitted workload's quota).
  std::map<std::string, std::vector<const Json*>> waiting;  // ns/group → gated pods
  std::vector<const Json*> admitted;
  for (const Json& pod : pods) {
    const std::string group = S(pod, "/metadata/labels/kueue.x-k8s.io~1pod-group-name"_json_pointer);
    const std::string phase = S(pod, "/status/phase"_json_pointer);
    if (group.empty() || pod["metadata"].contains("deletionTimestamp") || phase == "Succeeded" || phase == "Failed" ||
        !S(pod, "/spec/nodeName"_json_pointer).empty()) {
      continue;
    }
    if (HasGate(pod, kKueueGate)) {
      waiting[S(pod, "/metadata/namespace"_json_pointer) + "/" + group].push_back(&pod);
    } else {
      admitted.push_back(&pod);
    }
  }
  std::string ignored;
  placement.PlaceAll(admitted, &ignored);
  for (auto& [group, members] : waiting) {
    std::sort(members.begin(), members.end(), [](const Json* a, const Json* b) {
      return S(*a, "/metadata/name"_json_pointer) < S(*b, "/metadata/name"_json_pointer);
    });
    const std::string total = S(*members[0], "/metadata/annotations/kueue.x-k8s.io~1pod-group-total-count"_json_pointer);
    if (total.empty() || std::to_string(members.size()) != total) continue;  // the whole group or nothing
    std::string why;
    if (placement.PlaceAll(members, &why).empty()) continue;  // does not fit: stays queued
    for (const Json* pod : members) {
      auto r = pods_.InNamespace(S(*pod, "/metadata/namespace"_json_pointer))
                   .Patch(S(*pod, "/metadata/name"_json_pointer),
                          {{"spec", {{"schedulingGates", GatesWithout(*pod, kKueueGate)}}}});
      if (!r.ok()) spdlog::warn("ungate {}: {}", S(*pod, "/metadata/name"_json_pointer), r.status().ToString());
    }
    spdlog::info("admitted pod group {} ({} pods)", group, total);
  }
}

}  // namespace hypertrain::nodeagent
