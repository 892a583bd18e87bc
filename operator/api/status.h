#pragma once
// TrainingJob status: types, JSON conversion and the condition rules.
//
// Condition rules (PyTorchJob/JobSet conventions):
//  - Conditions are metav1.Condition-shaped and keyed by type; lastTransitionTime
//    changes only when a condition's status changes.
//  - Running and Restarting replace each other: setting one True sets the other False.
//  - Suspended=True sets Running False; Succeeded/Failed=True set Running and
//    Restarting False.
//  - Succeeded and Failed are terminal: once either is True, no condition changes.
//  - Setting an absent condition False records nothing, except Estimated
//    (its False says why a dry run has no estimate).
//  - status.state is the job's summary state: Failed/Succeeded, else Suspended,
//    else Restarting, else Running, else Created, else Estimated (a dry run
//    that created nothing), else Pending (Created=False says why, if known).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypertrain::api {

// Condition types.
inline constexpr char kCondCreated[] = "Created";
inline constexpr char kCondRunning[] = "Running";
inline constexpr char kCondRestarting[] = "Restarting";
inline constexpr char kCondSucceeded[] = "Succeeded";
inline constexpr char kCondFailed[] = "Failed";
inline constexpr char kCondSuspended[] = "Suspended";
// spec.estimateOnly: True once status.estimate holds the dry run's estimate.
inline constexpr char kCondEstimated[] = "Estimated";

// The enumerated reasons (the CRD's enum lists the same set).
namespace reason {
inline constexpr char kJobCreated[] = "JobCreated";
inline constexpr char kPodsPending[] = "PodsPending";
inline constexpr char kPodsRunning[] = "PodsRunning";
inline constexpr char kPodFailed[] = "PodFailed";
inline constexpr char kPodLost[] = "PodLost";
inline constexpr char kPodEvicted[] = "PodEvicted";
inline constexpr char kNodeUnhealthy[] = "NodeUnhealthy";
inline constexpr char kHang[] = "Hang";
inline constexpr char kJobRestarting[] = "JobRestarting";
inline constexpr char kAllPodsSucceeded[] = "AllPodsSucceeded";
inline constexpr char kBackoffLimitExceeded[] = "BackoffLimitExceeded";
inline constexpr char kDeadlineExceeded[] = "DeadlineExceeded";
inline constexpr char kNonRetryableExitCode[] = "NonRetryableExitCode";
inline constexpr char kInvalidSpec[] = "InvalidSpec";
inline constexpr char kJobSuspended[] = "JobSuspended";
inline constexpr char kJobResumed[] = "JobResumed";
inline constexpr char kJobSucceeded[] = "JobSucceeded";
inline constexpr char kJobFailed[] = "JobFailed";
// A gang not all Running within runPolicy.schedulingTimeoutSeconds (Restarting
// while schedulingRetry lasts, then Failed).
inline constexpr char kUnschedulable[] = "Unschedulable";
// An elastic job's gang restarted on another number of nodes (Restarting).
inline constexpr char kResized[] = "Resized";
inline constexpr char kEstimateReady[] = "EstimateReady";
inline constexpr char kEstimateUnavailable[] = "EstimateUnavailable";
// Created=False: the API server refused one of the job's objects (a quota, a
// missing PriorityClass or ServiceAccount, RBAC); retried with capped backoff.
inline constexpr char kPodCreationFailed[] = "PodCreationFailed";
// Created=False: an object under one of the job's names (its Service,
// ConfigMaps, ServiceAccount, Role, RoleBinding, a pod) exists without the
// job's controller ownerReference; the job uses nothing it does not own.
inline constexpr char kOwnershipConflict[] = "OwnershipConflict";
// Created=False: objects of a deleted job of the same name still exist (e.g.
// its pods terminating); created once the garbage collector removed them.
inline constexpr char kPreviousJobTerminating[] = "PreviousJobTerminating";
// Created=False: the job's namespace is one the operator ignores
// (--exclude-namespaces); nothing is created.
inline constexpr char kNamespaceExcluded[] = "NamespaceExcluded";
}  // namespace reason

// status.state when no condition gives another: nothing of the job runs yet
// (see the Created condition's reason).
inline constexpr char kStatePending[] = "Pending";

const std::vector<std::string>& ConditionTypes();
const std::vector<std::string>& ConditionReasons();

struct Condition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;  // RFC 3339
  int64_t observed_generation = 0;

  bool operator==(const Condition&) const = default;
};

struct PodCounts {
  int32_t active = 0;
  int32_t succeeded = 0;
  int32_t failed = 0;
  bool operator==(const PodCounts&) const = default;
};

struct Progress {
  std::optional<int64_t> step;
  std::optional<int64_t> max_steps;
  std::optional<double> loss;
  std::optional<double> tokens_per_second;
  std::optional<int64_t> last_checkpoint_step;
  std::string updated_at;  // RFC 3339
  bool operator==(const Progress&) const = default;
};

struct Fault {
  std::string reason;
  std::string message;
  std::string pod;
  std::string node;
  std::optional<int32_t> rank;
  std::optional<int32_t> exit_code;
  std::string time;
  // The failed container's finishedAt (RFC 3339), "" when unknown (a hang, a
  // node fault): where the recovery time starts (lastRecoverySeconds).
  std::string finished_at;
  bool operator==(const Fault&) const = default;
};

// The current attempt's way to all Running (runPolicy.schedulingTimeoutSeconds).
struct SchedulingStatus {
  // When the timeout clock started for this attempt: the gang created and,
  // under Kueue, admitted (no scheduling gate left). "" while not started.
  std::string start_time;
  int32_t timeouts = 0;    // scheduling timeouts so far (all attempts)
  std::string retry_time;  // a torn-down gang is created again at this time
  // Why the gang is not all Running yet: waiting for admission, or the
  // scheduler's message about a pending pod. "" once it runs.
  std::string message;
  bool operator==(const SchedulingStatus&) const = default;
  bool empty() const { return *this == SchedulingStatus{}; }
};

// One size an elastic job ran on (spec.elastic).
struct SizeRecord {
  int32_t nodes = 0;
  std::string since;   // RFC 3339: when the operator chose this size
  std::string reason;  // why this size
  // The steps trained at this size: from the checkpoint step it resumed from
  // (the first progress report at this size says it) to the last step reported.
  std::optional<int64_t> from_step;
  std::optional<int64_t> to_step;
  bool operator==(const SizeRecord&) const = default;
};

// The resizes of an elastic job.
struct ElasticStatus {
  std::string last_resize_time;     // RFC 3339; "" before the first resize
  std::vector<SizeRecord> history;  // oldest first, at most kMaxSizeHistory
  bool operator==(const ElasticStatus&) const = default;
  bool empty() const { return *this == ElasticStatus{}; }
};
inline constexpr size_t kMaxSizeHistory = 32;

struct TrainingJobStatus {
  std::string state;
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;
  std::string start_time;
  std::string completion_time;
  int32_t restart_count = 0;
  int32_t restart_attempt = 0;
  int32_t gpus = 0;
  int32_t world_size = 0;
  // Nodes of the current attempt: spec.nodes, or for an elastic job the size
  // the operator chose (0 until the first pass).
  int32_t current_nodes = 0;
  PodCounts pods;
  std::optional<Progress> progress;
  std::optional<Fault> last_fault;
  // The last gang restart's recovery, from the fault (lastFault.finishedAt,
  // else lastFault.time) to the first step after the resume that node 0's
  // trainer reported (operator/controller/recovery.h), and its attempt.
  std::optional<double> last_recovery_seconds;
  std::optional<int32_t> last_recovery_attempt;
  std::vector<std::string> excluded_nodes;
  std::map<std::string, int32_t> node_faults;
  SchedulingStatus scheduling;
  ElasticStatus elastic;
  // The dry run's estimate (operator/api/estimate.h); null when none.
  nlohmann::json estimate;

  bool operator==(const TrainingJobStatus&) const = default;
};

nlohmann::json ToJson(const TrainingJobStatus& status);
// Parses status JSON (as written by ToJson or by hand); absent means empty.
StatusOr<TrainingJobStatus> ParseStatus(const nlohmann::json& status);

const Condition* FindCondition(const TrainingJobStatus& status, std::string_view type);
bool IsConditionTrue(const TrainingJobStatus& status, std::string_view type);
// True once Succeeded or Failed is True.
bool IsFinished(const TrainingJobStatus& status);

// Sets condition `type` to `value` with the rules above, updates state, and
// returns whether anything changed. `now` is RFC 3339; `generation` is the
// job's metadata.generation.
bool SetJobCondition(TrainingJobStatus* status, std::string_view type, bool value,
                     std::string_view reason, std::string_view message, std::string_view now,
                     int64_t generation);
// Sets condition `type` False with the reason that explains it, adding it when
// absent (SetJobCondition leaves an absent condition absent for False), e.g.
// Created=False/PodCreationFailed: why the job's pods do not exist.
bool SetJobConditionFalse(TrainingJobStatus* status, std::string_view type, std::string_view reason,
                          std::string_view message, std::string_view now, int64_t generation);

// The summary state derived from the conditions (see the rules above).
std::string ComputeState(const TrainingJobStatus& status);

// Progress published by the launcher on node 0 as the pod annotation
// contract::kAnnotationProgress, decoded by the contract (contract/progress.h)
// into status.progress ("time" becomes updatedAt).
StatusOr<Progress> ParseProgressAnnotation(std::string_view value);

}  // namespace hypertrain::api
