#pragma once
// Fault classification for a gang of pods: which pod caused a failure (culprit
// ranking), whether to wait for the root cause's own status first (settle
// window), whether a running pod's node failed (node health), and whether the
// training step stopped advancing (hang deadline). Pure: observed structs and
// times in, verdicts out. What to do about a fault (restart or fail, node
// exclusion) is the plan's (plan.h).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/training_job.h"
#include "operator/controller/observed.h"

namespace hypertrain::controller {

// The pods of the current attempt by node rank (pointers into the observed pods).
using Gang = std::map<int, const ObservedPod*>;

// When this operator first saw a failed pod, by pod uid. The reconciler keeps
// it between passes; it only stands in for a missing or skewed finishedAt.
using FirstSeen = std::map<std::string, Clock::time_point>;

// A fault to act on: the status.lastFault fields other than the time.
struct DetectedFault {
  std::string reason;   // api::reason::k*
  std::string message;  // what happened, naming the pod, its rank and node
  std::string pod;
  std::string node;  // "" when no node is to blame (a hang)
  std::optional<int32_t> rank;
  std::optional<int> exit_code;
  std::string finished_at;  // the failed container's finishedAt, "" when none

  bool operator==(const DetectedFault&) const = default;
};

// When one rank dies, its peers fail their next collective and exit 200 (peer
// lost) or 201 (collective timeout), often within the same second. Class 0 is
// any other exit (a signal, an error of its own, an eviction), 1 is 201, 2 is 200.
int FollowOnClass(const PodFault& f);
// Whether `a` ranks before `b` as the cause: lower class first, then the
// earlier finishedAt (RFC 3339 strings of one format compare in time order).
bool CausedBefore(const PodFault& a, const PodFault& b);

struct Culprit {
  int rank = -1;
  const ObservedPod* pod = nullptr;
};
// The failed pod that caused the gang's failure; ties go to the lowest rank.
// nullopt when no pod of the gang failed.
std::optional<Culprit> FindCulprit(const Gang& gang);
// "pod <name> (node rank <r>, node <n>) exited with code <c>: <message>".
DetectedFault CulpritFault(const Culprit& culprit);

// Whether a fault counts against its node (status.nodeFaults, maxRepeatOffenders).
// Not a requested stop: an eviction (a drain, preemption, kubelet pressure) or an
// exit by SIGTERM/SIGINT/SIGHUP (`kubectl delete pod`, a rolling node drain) says
// nothing about the node's health; a crash, a kill, a hang or a lost node does.
bool CountsAgainstNode(const DetectedFault& fault);

// Settle: when every failed pod so far exited 200/201 (a peer's failure seen
// by its collectives) while other pods still run, the root cause's own status
// (e.g. 137 from another node) may just not have arrived yet; blaming the
// follow-on pod would restart for the wrong reason and count (maybe exclude)
// an innocent node. So wait, bounded by `window` from the earliest such exit:
// its container finishedAt, or the time first seen when that is missing or
// later (a node clock that runs ahead). A window of 0 never waits.
struct Settle {
  std::optional<Clock::time_point> wait_until;  // set while still waiting
  // Failed pods whose first-seen time was consulted: the caller records those
  // it has not seen before at `now`.
  std::vector<std::string> consulted;
};
Settle SettleWindow(const Gang& gang, const Culprit& culprit, const FirstSeen& first_seen,
                    Clock::time_point now, std::chrono::milliseconds window);

// Node health of the gang's live pods, in rank order: a pod's node is gone,
// lacks a healthy value of faultPolicy.nodeHealthLabel (when healthy values
// are listed), or has been NotReady for podPendingOrLostGraceSeconds. `nodes`
// holds the nodes that exist, by name.
struct NodeCheck {
  std::optional<DetectedFault> fault;
  // Until the earliest NotReady grace (of the pods checked) ends.
  std::optional<std::chrono::milliseconds> recheck_after;
};
NodeCheck CheckNodes(const Gang& gang, const std::map<std::string, ObservedNode>& nodes,
                     const api::FaultPolicy& policy, Clock::time_point now);

// When a pod on `node` counts as lost: now when the node is gone, the end of
// podPendingOrLostGraceSeconds when it is NotReady; nullopt while it is Ready.
std::optional<Clock::time_point> NodeLostAt(const std::string& node, const std::map<std::string, ObservedNode>& nodes,
                                            const api::FaultPolicy& policy, Clock::time_point now);

// Hang: once every pod runs, the step must advance within hangTimeoutSeconds,
// after a start-up allowance of max(startupTimeoutSeconds, hangTimeoutSeconds)
// from Running to the first report of this attempt. Off when hangTimeoutSeconds
// is 0. `status` has this pass's Running condition and progress.
struct HangCheck {
  std::optional<DetectedFault> fault;  // blames node rank 0's pod, no node
  std::optional<std::chrono::milliseconds> recheck_after;
};
HangCheck CheckHang(const std::string& job_name, const api::TrainingJobStatus& status,
                    const api::FaultPolicy& policy, bool all_running, Clock::time_point now);

}  // namespace hypertrain::controller
