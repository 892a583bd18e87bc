// Pure builders: TrainingJob (metadata + validated spec) in, Kubernetes objects
// out as JSON. No I/O, no clock: callers pass `now`. The reconciler creates
// what these return; tests check them without a server.
//
// Objects per job <job> in namespace <ns>:
//   Service   <job>              headless, publishNotReadyAddresses, selects the job's pods
//   ConfigMap <job>-config       the inline trainer config (key config.yaml)
//   Pod       <job>-node-<i>     one per node, hostname <job>-node-<i>, subdomain <job>
// Rank 0 is reachable as <job>-node-0.<job>.<ns>.svc (MASTER_ADDR).
#ifndef HYPERTRAIN_OPERATOR_CONTROLLER_BUILDERS_H_
#define HYPERTRAIN_OPERATOR_CONTROLLER_BUILDERS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "operator/api/training_job.h"

namespace hypertrain::controller {

inline constexpr char kContainerName[] = "trainer";
inline constexpr char kShmVolume[] = "dshm";
inline constexpr char kConfigVolume[] = "hypertrain-config";
inline constexpr char kRendezvousPortName[] = "rendezvous";
// Hugepages requested on EFA instances unless the user sets hugepages-2Mi.
inline constexpr char kDefaultHugepages[] = "5120Mi";
inline constexpr char kManagedBy[] = "hypertrain-operator";

std::string PodName(const std::string& job, int rank);
std::string ServiceName(const std::string& job);
std::string ConfigMapName(const std::string& job);
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

// EFA/NCCL defaults for the spec's hardware (user env overrides each):
//   GPU jobs:     NCCL_SOCKET_IFNAME=^lo, NCCL_DEBUG=WARN
//   EFA devices:  FI_PROVIDER=efa, FI_EFA_FORK_SAFE=1
//   RDMA (p4d/p5 families): FI_EFA_USE_DEVICE_RDMA=1
// CPU-only jobs get none (they rendezvous over loopback in local runs).
nlohmann::json DefaultEnv(const api::TrainingJobSpec& spec);

// The container env for node `rank` of `attempt`: defaults not overridden by
// the user, then the user's env in order, then the reserved rendezvous names.
nlohmann::json BuildEnv(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank,
                        int attempt);

// Container resources: the user's requests/limits plus nvidia.com/gpu and
// vpc.amazonaws.com/efa (request = limit), hugepages-2Mi (request = limit;
// default kDefaultHugepages on EFA instances) and, when hugepages are set but
// no cpu/memory is, a cpu request of 1 (Kubernetes requires one of them).
nlohmann::json BuildResources(const api::TrainingJobSpec& spec);

// Node affinity: the user's affinity with, ANDed into every required term, the
// node-health requirement (faultPolicy.nodeHealthLabel In healthyNodeValues)
// and kubernetes.io/hostname NotIn `excluded_nodes`. Null when there is nothing.
nlohmann::json BuildAffinity(const api::TrainingJobSpec& spec, const std::vector<std::string>& excluded_nodes);

struct PodOptions {
  int rank = 0;
  int restart_attempt = 0;
  std::vector<std::string> excluded_nodes;  // status.excludedNodes
};

// The pod for node `opts.rank`. Error when the rank is out of range.
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

#endif  // HYPERTRAIN_OPERATOR_CONTROLLER_BUILDERS_H_
