#include "operator/controller/faults.h"

#include <algorithm>
#include <csignal>

#include "contract/exit_codes.h"
#include "core/time.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using std::chrono::milliseconds;

void KeepEarliest(std::optional<milliseconds>* acc, milliseconds left) {
  if (!*acc || left < **acc) *acc = left;
}

// "pod <name> (node rank <r>, node <n>)", the node left out while unscheduled.
std::string Who(const ObservedPod& p, int rank) {
  return "pod " + p.name + " (node rank " + std::to_string(rank) + (p.node_name.empty() ? "" : ", node " + p.node_name) +
         ")";
}

}  // namespace

int FollowOnClass(const PodFault& f) {
  if (f.exit_code == 200) return 2;
  if (f.exit_code == 201) return 1;
  return 0;
}

bool CausedBefore(const PodFault& a, const PodFault& b) {
  if (FollowOnClass(a) != FollowOnClass(b)) return FollowOnClass(a) < FollowOnClass(b);
  if (a.finished_at.empty() || b.finished_at.empty()) return false;
  return a.finished_at < b.finished_at;
}

std::optional<Culprit> FindCulprit(const Gang& gang) {
  std::optional<Culprit> culprit;
  for (const auto& [rank, p] : gang) {
    if (!p->Failed()) continue;
    if (!culprit || CausedBefore(p->fault, culprit->pod->fault)) culprit = Culprit{rank, p};
  }
  return culprit;
}

DetectedFault CulpritFault(const Culprit& c) {
  const PodFault& f = c.pod->fault;
  std::string what = Who(*c.pod, c.rank);
  what += f.exit_code ? " exited with code " + std::to_string(*f.exit_code) : " failed";
  if (!f.message.empty()) what += ": " + f.message;
  return DetectedFault{f.reason, what, c.pod->name, c.pod->node_name, c.rank, f.exit_code, f.finished_at};
}

bool CountsAgainstNode(const DetectedFault& fault) {
  if (fault.reason == api::reason::kPodEvicted) return false;
  if (!fault.exit_code) return true;
  const int code = *fault.exit_code;
  return code != contract::kExitSignalBase + SIGTERM && code != contract::kExitSignalBase + SIGINT &&
         code != contract::kExitSignalBase + SIGHUP;
}

Settle SettleWindow(const Gang& gang, const Culprit& culprit, const FirstSeen& first_seen, Clock::time_point now,
                    milliseconds window) {
  Settle out;
  if (FollowOnClass(culprit.pod->fault) == 0 || window.count() <= 0) return out;
  const bool peers_running =
      std::any_of(gang.begin(), gang.end(), [](const auto& rp) { return !rp.second->Terminated(); });
  if (!peers_running) return out;
  std::optional<Clock::time_point> first;
  for (const auto& [rank, p] : gang) {
    if (!p->Failed()) continue;
    out.consulted.push_back(p->uid);
    auto seen = first_seen.find(p->uid);
    Clock::time_point t = seen == first_seen.end() ? now : seen->second;
    if (auto fin = ParseRfc3339(p->fault.finished_at); fin && *fin < t) t = *fin;
    if (!first || t < *first) first = t;
  }
  if (first && now < *first + window) out.wait_until = *first + window;
  return out;
}

NodeCheck CheckNodes(const Gang& gang, const std::map<std::string, ObservedNode>& nodes,
                     const api::FaultPolicy& policy, Clock::time_point now) {
  NodeCheck out;
  const auto& healthy = policy.healthy_node_values;
  for (const auto& [rank, p] : gang) {
    if (p->Terminated() || p->deleting || p->node_name.empty()) continue;
    const std::string who = Who(*p, rank);
    auto fault = [&](const char* reason, const std::string& what) {
      out.fault = DetectedFault{reason, who + ": " + what, p->name, p->node_name, rank, std::nullopt};
      return out;
    };
    auto n = nodes.find(p->node_name);
    if (n == nodes.end()) return fault(api::reason::kPodLost, "the node is gone");
    if (!healthy.empty()) {
      auto label = n->second.labels.find(policy.node_health_label);
      const std::string health = label == n->second.labels.end() ? "" : label->second;
      if (std::find(healthy.begin(), healthy.end(), health) == healthy.end()) {
        return fault(api::reason::kNodeUnhealthy,
                     "node label " + policy.node_health_label + "=" + (health.empty() ? "<none>" : health));
      }
    }
    const std::optional<Clock::time_point> lost_at = NodeLostAt(p->node_name, nodes, policy, now);
    if (!lost_at) continue;
    if (now >= *lost_at) {
      return fault(api::reason::kPodLost, "node NotReady for podPendingOrLostGraceSeconds=" +
                                              std::to_string(policy.pod_pending_or_lost_grace_seconds));
    }
    KeepEarliest(&out.recheck_after, std::chrono::duration_cast<milliseconds>(*lost_at - now));
  }
  return out;
}

std::optional<Clock::time_point> NodeLostAt(const std::string& node, const std::map<std::string, ObservedNode>& nodes,
                                            const api::FaultPolicy& policy, Clock::time_point now) {
  auto n = nodes.find(node);
  if (n == nodes.end()) return now;
  if (!n->second.not_ready_since) return std::nullopt;
  const auto since = ParseRfc3339(*n->second.not_ready_since).value_or(now);
  return since + std::chrono::seconds(policy.pod_pending_or_lost_grace_seconds);
}

HangCheck CheckHang(const std::string& job_name, const api::TrainingJobStatus& status, const api::FaultPolicy& policy,
                    bool all_running, Clock::time_point now) {
  HangCheck out;
  const api::Condition* running = api::FindCondition(status, api::kCondRunning);
  if (!all_running || policy.hang_timeout_seconds <= 0 || !running || running->status != "True") return out;
  const auto since = ParseRfc3339(running->last_transition_time).value_or(now);
  std::optional<Clock::time_point> reported;
  if (status.progress && status.progress->step) reported = ParseRfc3339(status.progress->updated_at);
  Clock::time_point deadline;
  std::string what;
  if (reported && *reported >= since) {
    deadline = *reported + std::chrono::seconds(policy.hang_timeout_seconds);
    what = "no step progress for hangTimeoutSeconds=" + std::to_string(policy.hang_timeout_seconds) + " (last step " +
           std::to_string(*status.progress->step) + ")";
  } else {
    const int32_t allowance = std::max(policy.startup_timeout_seconds, policy.hang_timeout_seconds);
    deadline = since + std::chrono::seconds(allowance);
    what = "no progress report within startupTimeoutSeconds=" + std::to_string(allowance) + " of all pods running";
  }
  if (now >= deadline) {
    out.fault = DetectedFault{api::reason::kHang, what, PodName(job_name, 0), "", std::nullopt, std::nullopt};
  } else {
    out.recheck_after = std::chrono::duration_cast<milliseconds>(deadline - now);
  }
  return out;
}

}  // namespace hypertrain::controller
