// The TrainingJob API (hypertrain.dev/v1alpha1): C++ types parsed from the
// object's JSON, defaults applied, and validation that goes beyond the CRD's
// OpenAPI schema (instance-type defaults, trainer config consistency, reserved
// env names, the HyperPod unhealthy taint). The CRD lives in
// crds/trainingjobs.hypertrain.dev.yaml; docs/OPERATOR.md is the reference.
#ifndef HYPERTRAIN_OPERATOR_API_TRAINING_JOB_H_
#define HYPERTRAIN_OPERATOR_API_TRAINING_JOB_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
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

struct RunPolicy {
  int32_t backoff_limit = 3;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int32_t> ttl_seconds_after_finished;
  CleanPodPolicy clean_pod_policy = CleanPodPolicy::kRunning;
  bool suspend = false;
};

struct FaultPolicy {
  std::vector<int32_t> non_retryable_exit_codes{contract::kDefaultNonRetryableExitCodes.begin(),
                                                contract::kDefaultNonRetryableExitCodes.end()};
  int32_t hang_timeout_seconds = 0;  // 0: hang detection off
  int32_t startup_timeout_seconds = 1800;
  int32_t max_repeat_offenders = 2;  // 0: never exclude nodes
  int32_t pod_pending_or_lost_grace_seconds = 300;
  std::string node_health_label = kHyperPodHealthLabel;
  std::vector<std::string> healthy_node_values = {"Schedulable"};  // empty: no health requirement
};

struct Scheduling {
  std::string scheduler_name;
  std::string priority_class_name;
  std::map<std::string, std::string> node_selector;
  nlohmann::json tolerations = nlohmann::json::array();  // core/v1 Toleration list
  nlohmann::json affinity;                                // core/v1 Affinity or null
  int64_t termination_grace_period_seconds = 60;
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

#endif  // HYPERTRAIN_OPERATOR_API_TRAINING_JOB_H_
