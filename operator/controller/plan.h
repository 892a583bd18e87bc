#pragma once
// The reconcile decision, pure: what the reconciler observed (the job, its
// pods, their nodes) in; the next status, the actions and events that follow
// from it, and when to look again out. No I/O and no clock: the reconciler
// (reconciler.h) reads the caches, calls Decide, writes the status once, then
// acts. One function per case of the table in reconciler.h decides that case.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "operator/api/status.h"
#include "operator/api/training_job.h"
#include "operator/controller/builders.h"
#include "operator/controller/faults.h"
#include "operator/controller/observed.h"

namespace hypertrain::controller {

// The job as observed: its metadata and cached status, every pod it owns (any
// attempt), and the nodes those pods run on.
struct Observed {
  api::ObjectMeta job;
  api::TrainingJobStatus status;  // the cached status; empty when unreadable
  std::vector<ObservedPod> pods;
  // The nodes of `pods` that exist, by name; nullopt turns node checks off.
  std::optional<std::map<std::string, ObservedNode>> nodes;
  // Elastic jobs: every node of the cluster, for the capacity to grow into or
  // shrink to (elastic.h); nullopt when not known.
  std::optional<std::vector<ObservedNode>> cluster_nodes;
  FirstSeen first_seen;  // the reconciler's memory of failed pods (see faults.h)
  // The progress annotation (hypertrain.dev/progress) node 0's launcher wrote on
  // the job's progress ConfigMap; nullopt when there is none yet.
  std::optional<std::string> progress;
  // Objects the caches hold under the names of the job's derived objects
  // (builders.h), keyed by ObjectKey, its own and others': nothing is created
  // over one, nothing not controlled by the job is used. Pods the job owns are
  // in `pods`; only other pods under its pod names are here.
  std::map<std::string, ObservedObject> objects;
  // The progress ConfigMap is the job's although its controller reference is
  // gone (the reconciler remembers its UID): the trainer's token may patch it.
  bool progress_known_ours = false;
  // The job is in a namespace the operator ignores (--exclude-namespaces).
  bool namespace_excluded = false;
};

// "Kind/name": the key of Observed::objects.
std::string ObjectKey(const std::string& kind, const std::string& name);

struct DecideOptions {
  // See Settle in faults.h; 0 never waits.
  std::chrono::milliseconds fault_settle_window{5000};
};

// Which row of the table the decision took.
enum class Case {
  kIgnored,           // being deleted: owner references let the GC remove the rest
  kExcluded,          // in an excluded namespace: Created=False/NamespaceExcluded, nothing created
  kOwnershipConflict, // an object under the job's name is not the job's: Created=False, nothing created
  kEarlierJob,        // objects of a deleted job of the same name linger: wait until they are gone
  kInvalidSpec,       // Failed/InvalidSpec, nothing created
  kFinished,          // cleanPodPolicy, then TTL deletion
  kEstimateOnly,      // spec.estimateOnly: status.estimate, nothing created
  kDeadlineExceeded,  // Failed/DeadlineExceeded
  kSuspended,         // pods deleted, Suspended
  kStalePods,         // pods of an older attempt are deleted first
  kFault,             // a fault: gang restart, or Failed when not retryable or out of budget
  kSettling,          // a follow-on exit: waiting for the root cause's status
  kSucceeded,         // every node's pod exited 0
  kSchedulingBackoff, // a gang torn down after a scheduling timeout waits to be created again
  kCreating,          // Service, ConfigMap, PodGroup, the pods' identity and the missing pods
  kUnschedulable,     // not all Running within schedulingTimeoutSeconds: torn down, retried or Failed
  kRunning,           // all pods exist: Running, progress, hang detection
  kResized,           // elastic: the gang restarts on fewer nodes (timeout) or more (capacity returned)
};
const char* CaseName(Case c);

struct Action {
  enum class Kind {
    kCreateService,
    kCreateConfigMap,
    kCreateServiceAccount,
    kCreateRole,
    kCreateRoleBinding,
    kCreatePodGroup,
    kCreatePod,
    // The progress ConfigMap's metadata back to the operator's: its controller
    // reference, its labels, no finalizers (whatever the trainer's token wrote).
    kRepairConfigMap,
    kPatchPod,
    kDeletePod,
    kDeleteJob,
  };
  Kind kind;
  std::string name;
  // Deletes: the uid precondition (only this very object is deleted). A job's
  // deletion propagates in the background.
  std::string uid;
  nlohmann::json object;  // creates: the object; AlreadyExists counts as done; patches: the merge patch
  // kCreatePod (whose `object` stays null): the pod's options. The reconciler
  // builds the pod (PodToCreate) only when its batch is sent: a whole gang's
  // pods as JSON at once cost ~18 KiB each, 36 MiB of a 2048-node job's pass.
  PodOptions pod;
  // kDeletePod with gracePeriodSeconds 0: the pod's node is lost, and no
  // kubelet will ever confirm a graceful end (the pod stays Terminating).
  bool force = false;

  bool operator==(const Action&) const = default;
};
// The pod a kCreatePod action of `job` creates (BuildPod with its options).
StatusOr<nlohmann::json> PodToCreate(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, const Action& a);
// "create Pod j-node-0", "create PodGroup j-1234abcd", "patch Pod j-node-0", "delete Pod j-node-1",
// "delete TrainingJob j".
std::string Describe(const Action& a);

struct Event {
  EventType type = EventType::kNormal;
  std::string reason;
  std::string message;

  bool operator==(const Event&) const = default;
};

// A pass that creates pods only acts on a current cache: when the server's job
// has another resourceVersion, the reconciler writes nothing, does nothing and
// looks again after this long.
inline constexpr std::chrono::milliseconds kStaleCacheRequeue{100};

struct Plan {
  Case decision = Case::kIgnored;
  // The next status; nullopt leaves the job's status alone. The reconciler
  // writes it when it differs from the cached one, before any action.
  std::optional<api::TrainingJobStatus> status;
  // The actions create pods: act only on a current cache (kStaleCacheRequeue).
  bool needs_current_cache = false;
  std::vector<Action> actions;  // in order; stop at the first error
  // One per condition that became True (or Suspended that became False), with
  // its reason and message, then node exclusions and repeated restarts.
  // Emitted only after the status write that recorded them.
  std::vector<Event> events;
  std::optional<std::chrono::milliseconds> requeue_after;
  std::vector<std::string> log;  // warnings worth a log line
  // Failed pods whose first-seen time the settle window consulted; the
  // reconciler records those it has not seen before at `now`.
  std::vector<std::string> first_seen;
};

// Decides one reconcile pass. `spec` is the parsed and validated spec, or the
// error that names the offending field. Errors are a pod that cannot be built.
StatusOr<Plan> Decide(const Observed& in, const StatusOr<api::TrainingJobSpec>& spec, Clock::time_point now,
                      const DecideOptions& opts = {});

// Retries of objects the API server refused: the first after this long, then
// as long again as the refusal has lasted (5, 10, 20 ... s), at most kMax.
inline constexpr std::chrono::milliseconds kCreationRetryMin{5000};
inline constexpr std::chrono::milliseconds kCreationRetryMax{300000};

// What follows when acting on `plan` (after its status was written) stopped at
// plans.actions[failed] with `error`. A create the API server refused is the
// job's to report, never a pod counted as created:
//   422 / 400 (invalid)      → Failed/InvalidSpec with the server's message;
//   403, 404 (a quota, a missing PriorityClass or ServiceAccount, RBAC)
//                            → Created=False/PodCreationFailed with it, a
//                              Warning Event when the cause is new, a retry
//                              after capped backoff (kCreationRetryMin..Max);
//   409 AlreadyExists of an object `existing` the job does not control (the
//   reconciler read it after the 409)
//                            → Created=False/OwnershipConflict naming it (or
//                              PreviousJobTerminating for a deleted namesake's),
//                              likewise retried and rolled back;
// either way the current attempt's pods, those observed and those this pass
// created, are deleted: a partial gang must not hold GPUs while it waits.
// nullopt for anything else (a conflict, throttling, the server or the network
// failing, a delete): the caller returns the error and the work queue retries.
std::optional<Plan> DecideActFailure(const Observed& in, const Plan& plan, size_t failed, const Status& error,
                                     Clock::time_point now, const ObservedObject* existing = nullptr);
// The Created=False message about `o`, an object under a name of `job`'s that
// the job does not control.
std::string ConflictMessage(const ObservedObject& o, const api::ObjectMeta& job);

}  // namespace hypertrain::controller
