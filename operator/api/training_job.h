#pragma once
// The TrainingJob API (hypertrain.dev/v1alpha1): C++ types parsed from the
// object's JSON, defaults applied, and validation that goes beyond the CRD's
// OpenAPI schema (instance-type defaults, trainer config consistency, reserved
// env names, the HyperPod unhealthy taint). The CRD lives in
// crds/trainingjobs.hypertrain.dev.yaml; docs/OPERATOR.md is the reference.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/exit_codes.h"
#include "contract/pod.h"
#include "core/status.h"
#include "operator/api/trainer_config.h"

namespace hypertrain::api {

inline constexpr char kGroup[] = "hypertrain.dev";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kApiVersion[] = "hypertrain.dev/v1alpha1";
inline constexpr char kKind[] = "TrainingJob";
inline constexpr char kPlural[] = "trainingjobs";
// Pod hostnames are "<name>-node-<rank>" (rank < 2048) and must fit a 63-char label.
inline constexpr size_t kMaxJobNameLength = 53;

// Pod labels and the progress annotation are the contract's (contract/pod.h);
// these names stay for the controller's existing callers.
using contract::kAnnotationProgress;
using contract::kLabelJobName;
using contract::kLabelNodeRank;
using contract::kLabelRestartAttempt;

// Node labels and taints on HyperPod.
inline constexpr char kInstanceTypeLabel[] = "node.kubernetes.io/instance-type";
inline constexpr char kHostnameLabel[] = "kubernetes.io/hostname";
inline constexpr char kHyperPodHealthLabel[] = "sagemaker.amazonaws.com/node-health-status";
inline constexpr char kDeepHealthLabel[] = "sagemaker.amazonaws.com/deep-health-check-status";
inline constexpr char kDeepHealthPassed[] = "Passed";
// HyperPod's network topology labels: layer 1 is the farthest network node
// (spine side), layer 3 the one closest to the instance.
inline constexpr char kNetworkNodeLayerLabelPrefix[] = "topology.k8s.aws/network-node-layer-";

enum class CleanPodPolicy { kNone, kRunning, kAll };
const char* CleanPodPolicyName(CleanPodPolicy p);

struct ObjectMeta {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;
  std::optional<std::string> deletion_timestamp;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
};

struct EnvVar {
  std::string name;
  std::optional<std::string> value;
  nlohmann::json value_from;  // null when absent; core/v1 EnvVarSource otherwise
};

struct ConfigMapRef {
  std::string name;
  std::string key = contract::kConfigFileName;
};

struct TrainerConfigSource {
  std::optional<std::string> inline_yaml;
  std::optional<ConfigMapRef> config_map;
  // Summary of the inline config (empty for a ConfigMap reference, whose
  // content the operator does not see at admission).
  std::optional<TrainerConfigSummary> summary;
};

// What a scheduling timeout does: tear the gang down and recreate it after a
// backoff (retries left), else fail the job with reason Unschedulable.
struct SchedulingRetry {
  int32_t limit = 0;                 // retries after a timeout; 0 fails at the first
  int32_t backoff_seconds = 60;      // the first wait; doubled per retry
  int32_t max_backoff_seconds = 900;
  bool counts_toward_backoff_limit = false;  // each retry also spends backoffLimit

  // The wait before retry `n` (0 first): backoff * 2^n, at most the maximum.
  int64_t BackoffSeconds(int n) const;
};

struct RunPolicy {
  int32_t backoff_limit = 3;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int32_t> ttl_seconds_after_finished;
  CleanPodPolicy clean_pod_policy = CleanPodPolicy::kRunning;
  bool suspend = false;
  // A gang not all Running this long after its pods were created (and, under
  // Kueue, admitted) is torn down; 0 never times out.
  int32_t scheduling_timeout_seconds = 0;
  SchedulingRetry scheduling_retry;
};

// HyperPod's deep health check (label kDeepHealthLabel = Passed) as a
// scheduling requirement: none, preferred (HyperPod CLI's default) or required.
enum class DeepHealthCheck { kIgnored, kPreferred, kRequired };
const char* DeepHealthCheckName(DeepHealthCheck d);

struct FaultPolicy {
  // Overrides of the exit-code policy (contract/exit_codes.h): codes 1-127
  // fail the job, 128-255 restart it, 2 never restarts.
  std::set<int32_t> retryable_exit_codes;
  std::set<int32_t> non_retryable_exit_codes;
  bool Retryable(int exit_code) const {
    return contract::IsRetryable(exit_code, retryable_exit_codes, non_retryable_exit_codes);
  }
  int32_t hang_timeout_seconds = 0;  // 0: hang detection off
  int32_t startup_timeout_seconds = 1800;
  int32_t max_repeat_offenders = 2;  // 0: never exclude nodes
  int32_t pod_pending_or_lost_grace_seconds = 300;
  std::string node_health_label = kHyperPodHealthLabel;
  std::vector<std::string> healthy_node_values = {"Schedulable"};  // empty: no health requirement
  DeepHealthCheck deep_health_check = DeepHealthCheck::kPreferred;
};

// Gang admission: who makes sure the whole gang starts or none of it.
enum class GangProvider {
  kNone,          // plain pods (the default scheduler places them one by one)
  kKueue,         // Kueue's pod-group integration: pods gated until Kueue admits the group
  kCoscheduling,  // scheduler-plugins coscheduling: a scheduling.x-k8s.io PodGroup
  kVolcano,       // Volcano: a scheduling.volcano.sh PodGroup, schedulerName volcano
};
const char* GangProviderName(GangProvider p);

struct GangScheduling {
  GangProvider provider = GangProvider::kNone;
  std::string queue_name;      // Kueue LocalQueue or Volcano Queue
  std::string priority_class;  // Kueue WorkloadPriorityClass
};

// Keep the gang under one network node of a topology level.
struct Topology {
  std::string key;        // node label, e.g. topology.k8s.aws/network-node-layer-3; "" = off
  bool required = true;   // Required: never split; Preferred: best effort
};

struct Scheduling {
  std::string scheduler_name;
  std::string priority_class_name;
  std::map<std::string, std::string> node_selector;
  nlohmann::json tolerations = nlohmann::json::array();  // core/v1 Toleration list
  nlohmann::json affinity;                                // core/v1 Affinity or null
  // Long enough to save an 8B model's sharded state after SIGTERM (docs/DISTRIBUTED.md).
  int64_t termination_grace_period_seconds = 300;
  GangScheduling gang;
  Topology topology;
};

// spec.podTemplate: what the user adds to the operator's pod. Parsed and
// validated at admission (owned fields and conflicts are errors naming the
// field); the builders merge it, the operator's fields winning where both speak.
struct PodTemplate {
  nlohmann::json spec = nlohmann::json::object();  // pod-level fields passed through verbatim
  nlohmann::json trainer = nlohmann::json::object();  // extra fields of the trainer container
  nlohmann::json env_from = nlohmann::json::array();  // trainer envFrom
  nlohmann::json sidecars = nlohmann::json::array();  // containers after the trainer
  nlohmann::json init_containers = nlohmann::json::array();
};

// spec.elastic: when a gang cannot be placed whole within
// runPolicy.schedulingTimeoutSeconds, run on as many nodes as fit (at least
// minNodes) and grow back when capacity returns. The trainer keeps the global
// batch of `nodes` on every size (contract/elastic.h); nodes stays the desired size.
struct Elastic {
  int32_t min_nodes = 1;
  int32_t max_nodes = 1;  // resolved: the spec's, else nodes
  // While below the desired size, capacity is looked at again this often
  // (node changes also trigger a look).
  int32_t check_interval_seconds = 60;
  // Never grow sooner than this after the last resize (each resize is a gang
  // restart from the last checkpoint).
  int32_t min_resize_interval_seconds = 600;
  // The sizes in [min_nodes, max_nodes] that keep the global batch and the
  // shard degree rule (contract::ElasticSizeProblem), ascending; holds min_nodes,
  // nodes and max_nodes.
  std::vector<int32_t> sizes;

  // The largest size <= n, or 0 when none is.
  int32_t LargestSizeAtMost(int64_t n) const;
};

// Resource quantities as Kubernetes strings ("4", "64Gi").
using ResourceList = std::map<std::string, std::string>;

struct TrainingJobSpec {
  std::string image;
  std::string image_pull_policy = "IfNotPresent";
  std::vector<std::string> command;  // defaulted to the launcher when empty
  std::vector<std::string> args;
  int32_t nodes = 1;
  int32_t gpus_per_node = 0;   // resolved: spec, else instance type, else 0
  int32_t nproc_per_node = 0;  // resolved: spec, else gpus_per_node
  int32_t efa_per_node = 0;    // resolved: spec, else instance type, else 0
  bool gpudirect_rdma = false;  // from the instance type
  std::string instance_type;   // "" when not pinned
  int32_t master_port = 29500;
  std::string checkpoint_dir;  // "" when unknown
  std::string service_account_name;
  ResourceList requests;  // user's extra requests (no GPU/EFA; see builders)
  ResourceList limits;
  std::string shm_size;  // "" = no size limit
  TrainerConfigSource trainer_config;
  nlohmann::json volumes = nlohmann::json::array();
  nlohmann::json volume_mounts = nlohmann::json::array();
  std::vector<EnvVar> env;
  std::map<std::string, std::string> pod_labels;
  std::map<std::string, std::string> pod_annotations;
  RunPolicy run_policy;
  FaultPolicy fault_policy;
  Scheduling scheduling;
  PodTemplate pod_template;
  std::optional<Elastic> elastic;  // nullopt: the job always runs on `nodes`
  // Things the user should know that are not errors (e.g. an instance type
  // not in the table): the operator reports each as a Warning event once.
  std::vector<std::string> warnings;
  // Dry run: the operator puts the estimate (operator/api/estimate.h) in
  // status.estimate and creates nothing until this is turned off.
  bool estimate_only = false;

  int64_t WorldSize() const { return static_cast<int64_t>(nodes) * nproc_per_node; }
  int64_t TotalGpus() const { return static_cast<int64_t>(nodes) * gpus_per_node; }
};

// The default container command: `hypertrain launch -- train`, which reads the
// rank count and the config path from the pod env.
std::vector<std::string> DefaultCommand();

// Parses metadata (name, namespace, uid, generation, ...). Errors name the field.
StatusOr<ObjectMeta> ParseObjectMeta(const nlohmann::json& metadata);

// Parses and validates `spec` of the TrainingJob named in `meta`, applying
// defaults. Any error names the offending field (e.g. "spec.env[3].name").
StatusOr<TrainingJobSpec> ParseSpec(const nlohmann::json& spec, const ObjectMeta& meta);

}  // namespace hypertrain::api
