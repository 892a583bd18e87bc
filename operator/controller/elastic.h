#pragma once
// Elastic jobs (spec.elastic), pure: which nodes could host one of the job's
// pods, the size the next attempt takes after a scheduling timeout or when
// capacity returns (the node-count arithmetic), and the size history in
// status. Decide applies them (plan_capacity.cc) in its rows "scheduling
// timeout" (shrink), "a gang restart" and "running below maxNodes" (grow).

#include <optional>
#include <string>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/training_job.h"
#include "operator/controller/faults.h"
#include "operator/controller/observed.h"

namespace hypertrain::controller {

// Why `node` cannot host a pod of `spec` as far as the node object tells; ""
// when it can. Checked: Ready, cordoned (spec.unschedulable), the pod's node
// selector and instance type, faultPolicy's health label, the deep health
// check when Required, status.excludedNodes, NoSchedule/NoExecute taints the
// pod does not tolerate, allocatable GPUs and EFA devices below a pod's. Not
// known here: what other pods use on the node (the operator watches its own
// pods only) and the user's own affinity. A node that passes may still be
// full; the scheduling timeout then shrinks the job again.
std::string NodeHostProblem(const api::TrainingJobSpec& spec, const ObservedNode& node,
                            const std::vector<std::string>& excluded);

struct Capacity {
  int hosts = 0;        // nodes that can host a pod
  std::string example;  // "node <name>: <why>" of the first that cannot; "" when every node can
};
Capacity CountHosts(const api::TrainingJobSpec& spec, const std::vector<ObservedNode>& nodes,
                    const std::vector<std::string>& excluded);

struct SizeChoice {
  int nodes = 0;
  std::string reason;  // why this size (status history, the pods' HYPERTRAIN_RESIZE_REASON)
  bool operator==(const SizeChoice&) const = default;
};

// After an attempt of `current` nodes was not all Running within
// schedulingTimeoutSeconds: the size of the next attempt, the largest of
// spec.elastic's sizes below `current` that fits, at least minNodes. What fits:
// with plain pods, the pods the scheduler bound (it had the whole timeout);
// under a gang provider (all or nothing), the nodes that can host a pod
// (`cluster`); without node information, one size less. nullopt when the job is
// not elastic or already at minNodes: then schedulingRetry decides.
std::optional<SizeChoice> SizeAfterTimeout(const api::TrainingJobSpec& spec, int current, const Gang& gang,
                                           const std::optional<std::vector<ObservedNode>>& cluster,
                                           const std::vector<std::string>& excluded);

// The size capacity allows when above `current`: the largest of spec.elastic's
// sizes up to maxNodes that the nodes able to host a pod cover; nullopt when
// none is above `current`. Without node information maxNodes is tried (a probe
// that the next scheduling timeout undoes when it does not fit).
std::optional<SizeChoice> SizeToGrow(const api::TrainingJobSpec& spec, int current,
                                     const std::optional<std::vector<ObservedNode>>& cluster,
                                     const std::vector<std::string>& excluded);

// status.elastic.history starts with the desired size when it is empty.
void StartSizeHistory(api::TrainingJobStatus* status, int nodes, const std::string& now);
// A resize at `now`: `choice` opens the next entry (the oldest dropped past api::kMaxSizeHistory),
// lastResizeTime and currentNodes follow.
void RecordResize(api::TrainingJobStatus* status, const SizeChoice& choice, const std::string& now);
// The current size's step range from a progress report of this attempt: it
// starts at the checkpoint the attempt resumed from (the first report's
// lastCheckpointStep, 0 without one) and ends at the latest step.
void TrackSizeSteps(api::TrainingJobStatus* status, const api::Progress& progress);

}  // namespace hypertrain::controller
