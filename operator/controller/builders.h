#pragma once
// Pure builders: TrainingJob (metadata + validated spec) in, Kubernetes objects
// out as JSON. No I/O, no clock: callers pass `now`. The reconciler creates
// what these return; tests check them without a server.
//
// Objects per job <job> in namespace <ns> (all owned by the job, so the garbage
// collector removes them with it):
//   Service        <job>              headless, publishNotReadyAddresses, selects the job's pods
//   ConfigMap      <job>-config       the inline trainer config (key config.yaml)
//   PodGroup       <job>-<uid8>       gang provider coscheduling or volcano: minMember = nodes
//                                     (an elastic job on N != nodes: <job>-<uid8>-n<N>, minMember N)
//   ServiceAccount <job>-trainer      the pods' identity, unless spec.serviceAccountName names one
//   ConfigMap      <job>-progress     node 0's launcher annotates it with progress (hypertrain.dev/progress)
//   Role           <job>-progress     patch on that one ConfigMap, nothing else
//   RoleBinding    <job>-progress     the Role to the pods' ServiceAccount
//   Pod            <job>-node-<i>     one per node, hostname <job>-node-<i>, subdomain <job>
// Rank 0 is reachable as <job>-node-0.<job>.<ns>.svc (MASTER_ADDR). The trainer
// pods can change nothing but their job's progress ConfigMap: not a pod, not an
// image, not another job's progress.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/profile.h"
#include "core/status.h"
#include "operator/api/training_job.h"

namespace hypertrain::controller {

inline constexpr char kContainerName[] = "trainer";
inline constexpr char kShmVolume[] = "dshm";
inline constexpr char kConfigVolume[] = "hypertrain-config";
inline constexpr char kRendezvousPortName[] = "rendezvous";
// The trainer container's port of `hypertrain launch`'s Prometheus endpoint.
inline constexpr char kMetricsPortName[] = "metrics";
// Hugepages requested on EFA instances unless the user sets hugepages-2Mi.
inline constexpr char kDefaultHugepages[] = "5120Mi";
inline constexpr char kManagedBy[] = "hypertrain-operator";

// Gang admission (spec.scheduling.gang): what each provider reads.
namespace gang {
// Kueue's pod-group integration (pods labelled with a queue and a group,
// gated until Kueue admits the whole group).
inline constexpr char kKueueQueueLabel[] = "kueue.x-k8s.io/queue-name";
inline constexpr char kKueuePriorityLabel[] = "kueue.x-k8s.io/priority-class";
inline constexpr char kKueueGroupLabel[] = "kueue.x-k8s.io/pod-group-name";
inline constexpr char kKueueTotalCountAnnotation[] = "kueue.x-k8s.io/pod-group-total-count";
inline constexpr char kKueueAdmissionGate[] = "kueue.x-k8s.io/admission";
// "false" on a terminated pod ends the group: Kueue releases its quota (a
// group whose pods failed would otherwise hold it, waiting for replacements).
inline constexpr char kKueueRetriableInGroup[] = "kueue.x-k8s.io/retriable-in-group";
// Kueue topology-aware scheduling and its rank-based ordering (pods with
// adjacent index land in the same domain).
inline constexpr char kKueueRequiredTopology[] = "kueue.x-k8s.io/podset-required-topology";
inline constexpr char kKueuePreferredTopology[] = "kueue.x-k8s.io/podset-preferred-topology";
inline constexpr char kKueuePodIndexLabelAnnotation[] = "kueue.x-k8s.io/pod-group-pod-index-label";
// scheduler-plugins coscheduling.
inline constexpr char kCoschedulingApiVersion[] = "scheduling.x-k8s.io/v1alpha1";
inline constexpr char kCoschedulingGroupLabel[] = "scheduling.x-k8s.io/pod-group";
inline constexpr char kCoschedulingScheduler[] = "scheduler-plugins-scheduler";
// Volcano.
inline constexpr char kVolcanoApiVersion[] = "scheduling.volcano.sh/v1beta1";
inline constexpr char kVolcanoGroupAnnotation[] = "scheduling.k8s.io/group-name";
inline constexpr char kVolcanoScheduler[] = "volcano";
}  // namespace gang
std::string PodName(const std::string& job, int rank);
std::string ServiceName(const std::string& job);
std::string ConfigMapName(const std::string& job);
// The gang's group name for every provider (Kueue's pod group, the PodGroup
// objects): "<job>-<first 8 of the uid>", so a job deleted and created again
// under the same name never joins the old group while its pods linger. An
// elastic job on another size than spec.nodes (`nodes` != 0) gets
// "<job>-<uid8>-n<nodes>": a group's size (minMember, Kueue's total count)
// never changes under the same name.
std::string PodGroupName(const api::ObjectMeta& job, int nodes = 0);
std::string TrainerServiceAccountName(const std::string& job);
std::string ProgressConfigMapName(const std::string& job);  // also the Role's and RoleBinding's name
// The pods' ServiceAccount: spec.serviceAccountName, else <job>-trainer.
std::string PodServiceAccountName(const api::ObjectMeta& job, const api::TrainingJobSpec& spec);
// "<job>-node-0.<job>.<ns>.svc"
std::string MasterAddr(const api::ObjectMeta& job);

// Labels selecting every pod of the job (any attempt).
nlohmann::json JobSelector(const std::string& job);
// The controller owner reference pointing at the TrainingJob.
nlohmann::json OwnerReference(const api::ObjectMeta& job);

nlohmann::json BuildService(const api::ObjectMeta& job, const api::TrainingJobSpec& spec);

// The ConfigMap holding the inline trainer config. Error when the spec refers
// to a user ConfigMap instead (nothing to build).
StatusOr<nlohmann::json> BuildConfigMap(const api::ObjectMeta& job, const api::TrainingJobSpec& spec);

// The job's own ServiceAccount (built only when spec.serviceAccountName is empty).
nlohmann::json BuildTrainerServiceAccount(const api::ObjectMeta& job);
// The empty progress ConfigMap, the Role allowing `patch` on it alone, and the
// RoleBinding of that Role to PodServiceAccountName.
nlohmann::json BuildProgressConfigMap(const api::ObjectMeta& job);
nlohmann::json BuildProgressRole(const api::ObjectMeta& job);
nlohmann::json BuildProgressRoleBinding(const api::ObjectMeta& job, const api::TrainingJobSpec& spec);
// The merge patch giving the progress ConfigMap back the metadata the operator
// made it with (the trainer's token may patch it): the job's controller
// ownerReference and labels, and no finalizers, so that it goes with the job.
nlohmann::json ProgressRepairPatch(const api::ObjectMeta& job);

// EFA/NCCL defaults for the spec's hardware (user env overrides each):
//   GPU jobs:     NCCL_SOCKET_IFNAME=^lo, NCCL_DEBUG=WARN
//   EFA devices:  FI_PROVIDER=efa, FI_EFA_FORK_SAFE=1
//   RDMA (p4d/p5 families): FI_EFA_USE_DEVICE_RDMA=1
// CPU-only jobs get none (they rendezvous over loopback in local runs).
nlohmann::json DefaultEnv(const api::TrainingJobSpec& spec);

struct PodOptions {
  int rank = 0;
  int restart_attempt = 0;
  std::vector<std::string> excluded_nodes;  // status.excludedNodes
  // Elastic jobs: the attempt's size (status.currentNodes; 0: spec.nodes) and,
  // when it differs from spec.nodes, why.
  int nodes = 0;
  std::string resize_reason;

  int Nodes(const api::TrainingJobSpec& spec) const { return nodes > 0 ? nodes : spec.nodes; }
  bool operator==(const PodOptions&) const = default;
};

// What BuildPod refuses: a rank outside the attempt's size, a negative attempt.
Status CheckPodOptions(const api::TrainingJobSpec& spec, const PodOptions& opts);

// The container env for node `opts.rank` of its attempt: defaults not
// overridden by the user, then the user's env in order, then the reserved
// rendezvous names (NNODES and WORLD_SIZE of the attempt's size), and for an
// elastic job the desired size and the resize reason.
nlohmann::json BuildEnv(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, const PodOptions& opts);
// The same for a job on spec.nodes.
nlohmann::json BuildEnv(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank, int attempt);

// The job's profile request (annotation contract::kAnnotationProfile), which
// pods built now carry as HYPERTRAIN_PROFILE; nullopt when absent or
// malformed (*error, when given, then says why; empty when absent).
std::optional<contract::ProfileRequest> ProfileOf(const api::ObjectMeta& job, std::string* error = nullptr);

// Container resources: the user's requests/limits plus nvidia.com/gpu and
// vpc.amazonaws.com/efa (request = limit), hugepages-2Mi (request = limit;
// default kDefaultHugepages on EFA instances) and, when hugepages are set but
// no cpu/memory is, a cpu request of 1 (Kubernetes requires one of them).
nlohmann::json BuildResources(const api::TrainingJobSpec& spec);

// The PodGroup of gang provider coscheduling (scheduling.x-k8s.io/v1alpha1:
// minMember = nodes, scheduleTimeoutSeconds from runPolicy) or volcano
// (scheduling.volcano.sh/v1beta1: minMember, minResources = the gang's
// requests, queue, priorityClassName), owned by the job. Null for the other
// providers (Kueue builds its own Workload from the pods).
// `nodes`: the attempt's size (0: spec.nodes).
nlohmann::json BuildPodGroup(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int nodes = 0);

// Affinity: the user's affinity with, ANDed into every required node term,
// the node-health requirement (faultPolicy.nodeHealthLabel In
// healthyNodeValues), the deep health check when required, and
// kubernetes.io/hostname NotIn `excluded_nodes`; a preferred term for the deep
// health check when preferred. Topology (spec.scheduling.topology, not under
// Kueue, whose topology-aware scheduling places the gang itself): every pod of
// the attempt under one domain of the topology key (required or preferred pod
// affinity on the job's pods of this attempt), and node rank r preferring the
// HyperPod layer-3 then layer-2 network node of rank r-1, so the scheduler,
// which binds the gang in rank (creation) order, puts consecutive ranks under
// the same switch. Null when there is nothing.
nlohmann::json BuildAffinity(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank, int attempt,
                             const std::vector<std::string>& excluded_nodes);

// The pod for node `opts.rank`: the operator's pod merged with
// spec.podTemplate (its pod-level fields, sidecars, init containers and the
// trainer container's extras; the operator's own fields are the operator's),
// the gang provider's labels, annotations, scheduler and scheduling gate.
// Error when the rank is out of range of the attempt's size.
StatusOr<nlohmann::json> BuildPod(const api::ObjectMeta& job, const api::TrainingJobSpec& spec,
                                     const PodOptions& opts);

enum class EventType { kNormal, kWarning };

// A core/v1 Event about the job. The name is "<job>.<hash of uid, reason,
// message, now>" so that re-emitting the same event at the same time is an
// AlreadyExists, not a duplicate. `now` is RFC 3339; messages are cut at 1024 bytes.
nlohmann::json BuildEvent(const api::ObjectMeta& job, EventType type, const std::string& reason,
                          const std::string& message, const std::string& now,
                          const std::string& reporting_instance);

}  // namespace hypertrain::controller
