#pragma once
// The node agent's scheduler, pure: one pass's view of its nodes (what each
// has allocated, which pods sit where) and the placement decisions made on it
// (docs/NODE_AGENT.md, "Scheduling"). The agent (agent.h) binds, patches and
// reports; this file decides.
#include <map>
#include <string>
#include <vector>

#include "localcluster/nodeagent/pod_spec.h"

namespace hypertrain::nodeagent {

class Placement {
 public:
  // `nodes`: the agent's Node objects; `pods`: every pod (the non-terminal
  // ones bound to these nodes count as allocated).
  Placement(std::vector<Json> nodes, const std::vector<Json>& pods);

  // The node for `pod`: the first, fewest pods first, that is schedulable,
  // matches nodeSelector, required node and pod affinity, tolerates its taints
  // and has room. "" when none, with `reasons` per node.
  std::string Pick(const Json& pod, std::string* reasons) const;
  // Accounts `pod` on `node` (requests and pod affinity of later pods).
  void Place(const Json& pod, const std::string& node);
  // Places all `pods` at once, in order (a gang): their nodes, or empty with
  // `why` naming the first pod that did not fit.
  std::vector<std::string> PlaceAll(const std::vector<const Json*>& pods, std::string* why);

  size_t node_count() const { return nodes_.size(); }

 private:
  std::vector<Json> nodes_;
  std::map<std::string, Json> by_name_;
  std::map<std::string, std::map<std::string, double>> used_;
  std::vector<PlacedPod> placed_;
};

// Gang scheduling of scheduler-plugins' coscheduling (label
// scheduling.x-k8s.io/pod-group) and Volcano (annotation
// scheduling.k8s.io/group-name): the PodGroup a pod belongs to.
struct GangRef {
  std::string api_version;  // scheduling.x-k8s.io/v1alpha1 or scheduling.volcano.sh/v1beta1
  std::string ns, name;
  std::string key() const { return ns + "/" + api_version + "/" + name; }
};
// Empty name when the pod belongs to no gang.
GangRef GangOf(const Json& pod);

// Kueue's pod-group integration: the admission gate, the group label and the
// total-count annotation.
inline constexpr char kKueueGate[] = "kueue.x-k8s.io/admission";
inline constexpr char kKueueGroupLabel[] = "kueue.x-k8s.io/pod-group-name";
inline constexpr char kKueueTotalCount[] = "kueue.x-k8s.io/pod-group-total-count";
bool HasGate(const Json& pod, const std::string& gate);
bool Gated(const Json& pod);  // any scheduling gate
// spec.schedulingGates without `gate`.
Json GatesWithout(const Json& pod, const std::string& gate);

}  // namespace hypertrain::nodeagent
