#include "operator/controller/elastic.h"

#include <algorithm>

namespace hypertrain::controller {
namespace {

using nlohmann::json;

// Whether one of `tolerations` (core/v1 Toleration list) tolerates `t`.
bool Tolerated(const json& tolerations, const NodeTaint& t) {
  for (const json& tol : tolerations.is_array() ? tolerations : json::array()) {
    if (!tol.is_object()) continue;
    const std::string effect = tol.value("effect", "");
    if (!effect.empty() && effect != t.effect) continue;
    const std::string key = tol.value("key", "");
    const std::string op = tol.value("operator", "Equal");
    if (op == "Exists" && (key.empty() || key == t.key)) return true;
    if (op == "Equal" && key == t.key && tol.value("value", "") == t.value) return true;
  }
  return false;
}

// An integer quantity ("8"); 0 when absent or not a plain integer.
int64_t Count(const std::map<std::string, std::string>& resources, const char* key) {
  auto it = resources.find(key);
  if (it == resources.end() || it->second.empty() ||
      it->second.find_first_not_of("0123456789") != std::string::npos || it->second.size() > 9) {
    return 0;
  }
  return std::stoll(it->second);
}

std::string Label(const ObservedNode& node, const std::string& key) {
  auto it = node.labels.find(key);
  return it == node.labels.end() ? "<none>" : it->second;
}

std::string Nodes(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

}  // namespace

std::string NodeHostProblem(const api::TrainingJobSpec& spec, const ObservedNode& node,
                            const std::vector<std::string>& excluded) {
  if (node.not_ready_since) return "NotReady";
  if (node.unschedulable) return "cordoned (spec.unschedulable)";
  if (std::find(excluded.begin(), excluded.end(), node.name) != excluded.end()) return "in status.excludedNodes";
  std::map<std::string, std::string> selector = spec.scheduling.node_selector;
  if (!spec.instance_type.empty()) selector[api::kInstanceTypeLabel] = spec.instance_type;
  for (const auto& [k, v] : selector) {
    if (Label(node, k) != v) return k + "=" + Label(node, k) + ", the pods select " + v;
  }
  const api::FaultPolicy& fp = spec.fault_policy;
  const std::string health = Label(node, fp.node_health_label);
  if (!fp.healthy_node_values.empty() &&
      std::find(fp.healthy_node_values.begin(), fp.healthy_node_values.end(), health) == fp.healthy_node_values.end()) {
    return fp.node_health_label + "=" + health;
  }
  if (fp.deep_health_check == api::DeepHealthCheck::kRequired && Label(node, api::kDeepHealthLabel) != api::kDeepHealthPassed) {
    return std::string(api::kDeepHealthLabel) + "=" + Label(node, api::kDeepHealthLabel) + " (deepHealthCheck Required)";
  }
  for (const NodeTaint& t : node.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    if (!Tolerated(spec.scheduling.tolerations, t)) return "taint " + t.key + "=" + t.value + ":" + t.effect;
  }
  if (spec.gpus_per_node > 0 && Count(node.allocatable, "nvidia.com/gpu") < spec.gpus_per_node) {
    return "allocatable nvidia.com/gpu " + std::to_string(Count(node.allocatable, "nvidia.com/gpu")) + " < " +
           std::to_string(spec.gpus_per_node);
  }
  if (spec.efa_per_node > 0 && Count(node.allocatable, "vpc.amazonaws.com/efa") < spec.efa_per_node) {
    return "allocatable vpc.amazonaws.com/efa " + std::to_string(Count(node.allocatable, "vpc.amazonaws.com/efa")) +
           " < " + std::to_string(spec.efa_per_node);
  }
  return "";
}

Capacity CountHosts(const api::TrainingJobSpec& spec, const std::vector<ObservedNode>& nodes,
                    const std::vector<std::string>& excluded) {
  Capacity c;
  for (const ObservedNode& n : nodes) {
    const std::string why = NodeHostProblem(spec, n, excluded);
    if (why.empty()) {
      ++c.hosts;
    } else if (c.example.empty()) {
      c.example = "node " + n.name + ": " + why;
    }
  }
  return c;
}

std::optional<SizeChoice> SizeAfterTimeout(const api::TrainingJobSpec& spec, int current, const Gang& gang,
                                           const std::optional<std::vector<ObservedNode>>& cluster,
                                           const std::vector<std::string>& excluded) {
  if (!spec.elastic || current <= spec.elastic->min_nodes) return std::nullopt;
  const api::Elastic& e = *spec.elastic;
  int bound = 0;
  for (const auto& [rank, pod] : gang) bound += !pod->node_name.empty();
  int fit = current - 1;
  std::string basis;
  if (spec.scheduling.gang.provider == api::GangProvider::kNone && bound > 0) {
    fit = bound;
    basis = std::to_string(bound) + " of " + std::to_string(current) + " pods were placed";
  } else if (cluster) {
    const Capacity c = CountHosts(spec, *cluster, excluded);
    fit = c.hosts;
    basis = Nodes(c.hosts) + " can host a pod" + (c.example.empty() ? "" : " (" + c.example + ")");
  } else {
    basis = "no node information, one size less";
  }
  const int next = std::max(e.min_nodes, e.LargestSizeAtMost(std::min(fit, current - 1)));
  if (next >= current) return std::nullopt;
  return SizeChoice{next, Nodes(next) + " of " + std::to_string(spec.nodes) + ": the gang of " +
                              std::to_string(current) + " was not all Running within schedulingTimeoutSeconds=" +
                              std::to_string(spec.run_policy.scheduling_timeout_seconds) + "; " + basis};
}

std::optional<SizeChoice> SizeToGrow(const api::TrainingJobSpec& spec, int current,
                                     const std::optional<std::vector<ObservedNode>>& cluster,
                                     const std::vector<std::string>& excluded) {
  if (!spec.elastic || current >= spec.elastic->max_nodes) return std::nullopt;
  const api::Elastic& e = *spec.elastic;
  int capacity = e.max_nodes;
  std::string basis = "no node information: trying maxNodes " + std::to_string(e.max_nodes);
  if (cluster) {
    capacity = CountHosts(spec, *cluster, excluded).hosts;
    basis = Nodes(capacity) + " can host a pod again";
  }
  const int next = e.LargestSizeAtMost(std::min(capacity, e.max_nodes));
  if (next <= current) return std::nullopt;
  return SizeChoice{next, Nodes(next) + " of " + std::to_string(spec.nodes) + ": " + basis};
}

void StartSizeHistory(api::TrainingJobStatus* status, int nodes, const std::string& now) {
  if (!status->elastic.history.empty()) return;
  status->elastic.history.push_back(api::SizeRecord{nodes, now, "the desired size (spec.nodes)", {}, {}});
}

void RecordResize(api::TrainingJobStatus* status, const SizeChoice& choice, const std::string& now) {
  // The current entry's steps are those its attempts reported (TrackSizeSteps);
  // an entry whose gang never ran keeps none.
  auto& history = status->elastic.history;
  history.push_back(api::SizeRecord{choice.nodes, now, choice.reason, {}, {}});
  if (history.size() > api::kMaxSizeHistory) history.erase(history.begin());
  status->elastic.last_resize_time = now;
  status->current_nodes = choice.nodes;
}

void TrackSizeSteps(api::TrainingJobStatus* status, const api::Progress& progress) {
  auto& history = status->elastic.history;
  if (history.empty() || !progress.step) return;
  api::SizeRecord& current = history.back();
  if (!current.from_step) current.from_step = std::min(*progress.step, progress.last_checkpoint_step.value_or(0));
  current.to_step = progress.step;
}

}  // namespace hypertrain::controller
