#include "localcluster/nodeagent/placement.h"

#include <algorithm>

namespace hypertrain::nodeagent {
namespace {

std::string S(const Json& j, const Json::json_pointer& p) {
  return j.contains(p) && j[p].is_string() ? j[p].get<std::string>() : "";
}

bool Terminal(const Json& pod) {
  const std::string phase = S(pod, "/status/phase"_json_pointer);
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace

Placement::Placement(std::vector<Json> nodes, const std::vector<Json>& pods) : nodes_(std::move(nodes)) {
  for (const Json& n : nodes_) by_name_[S(n, "/metadata/name"_json_pointer)] = n;
  for (const Json& pod : pods) {
    const std::string node = S(pod, "/spec/nodeName"_json_pointer);
    if (node.empty() || Terminal(pod) || !by_name_.count(node)) continue;
    Place(pod, node);
  }
}

void Placement::Place(const Json& pod, const std::string& node) {
  for (const auto& [k, v] : PodRequests(pod)) used_[node][k] += v;
  placed_.push_back(PlacedPod{S(pod, "/metadata/namespace"_json_pointer), node,
                              pod.contains("/metadata/labels"_json_pointer) ? pod["metadata"]["labels"] : Json::object()});
}

std::string Placement::Pick(const Json& pod, std::string* reasons) const {
  const auto req = PodRequests(pod);
  // Spread: the node with the fewest pods first (a gang's pods land on
  // different nodes, as GPU requests force on a real cluster).
  std::vector<const Json*> order;
  for (const Json& n : nodes_) order.push_back(&n);
  auto pods_on = [&](const Json* n) {
    auto u = used_.find(S(*n, "/metadata/name"_json_pointer));
    if (u == used_.end()) return 0.0;
    auto p = u->second.find("pods");
    return p == u->second.end() ? 0.0 : p->second;
  };
  std::stable_sort(order.begin(), order.end(), [&](const Json* a, const Json* b) { return pods_on(a) < pods_on(b); });
  static const std::map<std::string, double> kNone;
  for (const Json* node : order) {
    const std::string nn = S(*node, "/metadata/name"_json_pointer);
    std::string why;
    auto u = used_.find(nn);
    if (node->contains("/spec/unschedulable"_json_pointer) && (*node)["spec"]["unschedulable"] == true) {
      why = "unschedulable";
    } else if (MatchesNode(pod, *node, &why) && ToleratesTaints(pod, *node, &why) &&
               MatchesPodAffinity(pod, *node, placed_, by_name_, &why) &&
               Fits(req, u == used_.end() ? kNone : u->second, *node, &why)) {
      return nn;
    }
    *reasons += (reasons->empty() ? "" : "; ") + nn + ": " + why;
  }
  return "";
}

std::vector<std::string> Placement::PlaceAll(const std::vector<const Json*>& pods, std::string* why) {
  Placement trial = *this;
  std::vector<std::string> out;
  for (const Json* pod : pods) {
    std::string reasons;
    const std::string node = trial.Pick(*pod, &reasons);
    if (node.empty()) {
      *why = S(*pod, "/metadata/name"_json_pointer) + ": " + reasons;
      return {};
    }
    trial.Place(*pod, node);
    out.push_back(node);
  }
  *this = std::move(trial);
  return out;
}

GangRef GangOf(const Json& pod) {
  GangRef g;
  g.ns = S(pod, "/metadata/namespace"_json_pointer);
  if (std::string n = S(pod, "/metadata/labels/scheduling.x-k8s.io~1pod-group"_json_pointer); !n.empty()) {
    g.api_version = "scheduling.x-k8s.io/v1alpha1";
    g.name = n;
  } else if (std::string v = S(pod, "/metadata/annotations/scheduling.k8s.io~1group-name"_json_pointer); !v.empty()) {
    g.api_version = "scheduling.volcano.sh/v1beta1";
    g.name = v;
  }
  return g;
}

bool HasGate(const Json& pod, const std::string& gate) {
  if (!pod.contains("/spec/schedulingGates"_json_pointer)) return false;
  for (const Json& g : pod["spec"]["schedulingGates"]) {
    if (g.is_object() && g.value("name", "") == gate) return true;
  }
  return false;
}

bool Gated(const Json& pod) {
  return pod.contains("/spec/schedulingGates"_json_pointer) && pod["spec"]["schedulingGates"].is_array() &&
         !pod["spec"]["schedulingGates"].empty();
}

Json GatesWithout(const Json& pod, const std::string& gate) {
  Json out = Json::array();
  if (!pod.contains("/spec/schedulingGates"_json_pointer)) return out;
  for (const Json& g : pod["spec"]["schedulingGates"]) {
    if (!g.is_object() || g.value("name", "") != gate) out.push_back(g);
  }
  return out;
}

}  // namespace hypertrain::nodeagent
