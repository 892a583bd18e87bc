#include "operator/api/training_job.h"

#include <algorithm>
#include <regex>
#include <set>

#include "contract/env.h"
#include "operator/api/instance_types.h"
#include "operator/api/parse_util.h"
#include "operator/api/spec_parts.h"

namespace hypertrain::api {

int64_t SchedulingRetry::BackoffSeconds(int n) const {
  int64_t wait = backoff_seconds;
  for (int i = 0; i < n && wait < max_backoff_seconds; ++i) wait *= 2;
  return std::min<int64_t>(wait, max_backoff_seconds);
}

const char* DeepHealthCheckName(DeepHealthCheck d) {
  switch (d) {
    case DeepHealthCheck::kIgnored: return "Ignored";
    case DeepHealthCheck::kRequired: return "Required";
    case DeepHealthCheck::kPreferred: break;
  }
  return "Preferred";
}

namespace {

using nlohmann::json;
using namespace parse;

ResourceList ParseResourceList(const json& obj, const char* key, const std::string& path) {
  ResourceList out;
  const json* v = Find(obj, key);
  if (!v) return out;
  const std::string p = Join(path, key);
  RequireObject(*v, p);
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string field = p + "." + it.key();
    if (it.key() == "nvidia.com/gpu") Fail(field, "set spec.gpusPerNode instead; the operator owns this resource");
    if (it.key() == "vpc.amazonaws.com/efa") Fail(field, "set spec.efaPerNode instead; the operator owns this resource");
    out[it.key()] = QuantityValue(it.value(), field);
  }
  return out;
}

FaultPolicy ParseFaultPolicy(const json* v, const std::string& path) {
  FaultPolicy fp;
  if (!v) return fp;
  RequireObject(*v, path);
  for (int32_t c : ExitCodeList(*v, "retryableExitCodes", path)) {
    if (c == contract::kExitConfigError) {
      Fail(Join(path, "retryableExitCodes"), "2 (a configuration error) fails the same way on every attempt and is "
                                             "never retried");
    }
    fp.retryable_exit_codes.insert(c);
  }
  for (int32_t c : ExitCodeList(*v, "nonRetryableExitCodes", path)) {
    if (fp.retryable_exit_codes.count(c)) {
      Fail(Join(path, "nonRetryableExitCodes"), "exit code " + std::to_string(c) +
                                                   " is also in retryableExitCodes");
    }
    fp.non_retryable_exit_codes.insert(c);
  }
  const int64_t kMax = INT32_MAX;
  fp.hang_timeout_seconds = OptInt(*v, "hangTimeoutSeconds", path, 0, kMax).value_or(fp.hang_timeout_seconds);
  fp.startup_timeout_seconds =
      OptInt(*v, "startupTimeoutSeconds", path, 0, kMax).value_or(fp.startup_timeout_seconds);
  fp.max_repeat_offenders = OptInt(*v, "maxRepeatOffenders", path, 0, kMax).value_or(fp.max_repeat_offenders);
  fp.pod_pending_or_lost_grace_seconds =
      OptInt(*v, "podPendingOrLostGraceSeconds", path, 0, kMax).value_or(fp.pod_pending_or_lost_grace_seconds);
  if (auto label = OptString(*v, "nodeHealthLabel", path, 317)) {
    if (label->empty()) Fail(Join(path, "nodeHealthLabel"), "must not be empty");
    fp.node_health_label = *label;
  }
  if (Find(*v, "healthyNodeValues")) fp.healthy_node_values = StringList(*v, "healthyNodeValues", path, 16);
  if (auto d = OptString(*v, "deepHealthCheck", path)) {
    const std::string m = OneOf(*d, {"Ignored", "Preferred", "Required"}, Join(path, "deepHealthCheck"));
    fp.deep_health_check = m == "Ignored"    ? DeepHealthCheck::kIgnored
                           : m == "Required" ? DeepHealthCheck::kRequired
                                             : DeepHealthCheck::kPreferred;
  }
  return fp;
}

SchedulingRetry ParseSchedulingRetry(const json* v, const std::string& path) {
  SchedulingRetry r;
  if (!v) return r;
  RequireObject(*v, path);
  r.limit = static_cast<int32_t>(OptInt(*v, "limit", path, 0, 1000).value_or(r.limit));
  r.backoff_seconds = static_cast<int32_t>(OptInt(*v, "backoffSeconds", path, 0, 86400).value_or(r.backoff_seconds));
  r.max_backoff_seconds =
      static_cast<int32_t>(OptInt(*v, "maxBackoffSeconds", path, 0, 86400).value_or(r.max_backoff_seconds));
  if (r.max_backoff_seconds < r.backoff_seconds) {
    Fail(Join(path, "maxBackoffSeconds"), std::to_string(r.max_backoff_seconds) + " is less than backoffSeconds " +
                                              std::to_string(r.backoff_seconds));
  }
  r.counts_toward_backoff_limit = OptBool(*v, "countsTowardBackoffLimit", path).value_or(false);
  return r;
}

RunPolicy ParseRunPolicy(const json* v, const std::string& path) {
  RunPolicy rp;
  if (!v) return rp;
  RequireObject(*v, path);
  rp.backoff_limit = OptInt(*v, "backoffLimit", path, 0, 1000).value_or(rp.backoff_limit);
  rp.active_deadline_seconds = OptInt(*v, "activeDeadlineSeconds", path, 1, INT64_MAX);
  if (auto ttl = OptInt(*v, "ttlSecondsAfterFinished", path, 0, INT32_MAX)) rp.ttl_seconds_after_finished = *ttl;
  if (auto p = OptString(*v, "cleanPodPolicy", path)) {
    std::string s = OneOf(*p, {"None", "Running", "All"}, Join(path, "cleanPodPolicy"));
    rp.clean_pod_policy = s == "None" ? CleanPodPolicy::kNone
                          : s == "All" ? CleanPodPolicy::kAll
                                       : CleanPodPolicy::kRunning;
  }
  rp.suspend = OptBool(*v, "suspend", path).value_or(false);
  rp.scheduling_timeout_seconds =
      static_cast<int32_t>(OptInt(*v, "schedulingTimeoutSeconds", path, 0, INT32_MAX).value_or(0));
  rp.scheduling_retry = ParseSchedulingRetry(Find(*v, "schedulingRetry"), Join(path, "schedulingRetry"));
  if (Find(*v, "schedulingRetry") && rp.scheduling_timeout_seconds == 0) {
    Fail(Join(path, "schedulingRetry"), "needs schedulingTimeoutSeconds: without a timeout nothing is retried");
  }
  return rp;
}

TrainerConfigSource ParseTrainerConfig(const json* v, const std::string& path) {
  if (!v) Fail(path, "required: inline YAML (recipe layout) or configMapRef");
  RequireObject(*v, path);
  TrainerConfigSource src;
  src.inline_yaml = OptString(*v, "inline", path, 262144);
  if (const json* ref = Find(*v, "configMapRef")) {
    const std::string p = Join(path, "configMapRef");
    RequireObject(*ref, p);
    ConfigMapRef r;
    r.name = OptString(*ref, "name", p, 253).value_or("");
    if (r.name.empty()) Fail(Join(p, "name"), "required");
    r.key = OptString(*ref, "key", p, 253).value_or(contract::kConfigFileName);
    if (r.key.empty()) Fail(Join(p, "key"), "must not be empty");
    src.config_map = r;
  }
  if (src.inline_yaml.has_value() == src.config_map.has_value()) {
    Fail(path, "exactly one of inline or configMapRef must be set");
  }
  if (src.inline_yaml && src.inline_yaml->empty()) Fail(Join(path, "inline"), "must not be empty");
  return src;
}

// spec.instanceType, gpusPerNode, efaPerNode, nprocPerNode: the table's
// defaults, or the user's numbers (with warnings) for a type not in the table.
void ParseHardware(const json& spec, TrainingJobSpec& s) {
  const std::string P = "spec";
  std::optional<InstanceType> it;
  if (auto t = OptString(spec, "instanceType", P, 63)) {
    static const std::regex kType(R"(^ml\.[a-z0-9-]+\.[a-z0-9]+$)");
    if (!std::regex_match(*t, kType)) {
      Fail("spec.instanceType", "'" + *t + "' is not a HyperPod instance type such as ml.p5.48xlarge (ml. prefix)");
    }
    s.instance_type = *t;
    it = LookupInstanceType(*t);
  }
  const bool unknown_type = !s.instance_type.empty() && !it;
  std::optional<int64_t> gpus = OptInt(spec, "gpusPerNode", P, 0, 16);
  if (gpus) {
    if (it && *gpus > it->gpus) {
      Fail("spec.gpusPerNode", std::to_string(*gpus) + " exceeds the " + std::to_string(it->gpus) + " GPUs of " +
                                   it->name);
    }
    s.gpus_per_node = static_cast<int32_t>(*gpus);
  } else if (unknown_type) {
    Fail("spec.gpusPerNode", "required: instance type '" + s.instance_type +
                                 "' is not in the operator's table (docs/USER_GUIDE.md lists it); give gpusPerNode "
                                 "and efaPerNode");
  } else {
    s.gpus_per_node = it ? it->gpus : 0;
  }
  std::optional<int64_t> efa = OptInt(spec, "efaPerNode", P, 0, 32);
  if (efa) {
    if (it && *efa > it->efa_devices) {
      Fail("spec.efaPerNode", std::to_string(*efa) + " exceeds the " + std::to_string(it->efa_devices) +
                                  " EFA devices of " + it->name);
    }
    s.efa_per_node = static_cast<int32_t>(*efa);
  } else {
    s.efa_per_node = it ? it->efa_devices : 0;
  }
  s.gpudirect_rdma = it && it->gpudirect_rdma && s.efa_per_node > 0;
  if (unknown_type) {
    std::string w = "instance type " + s.instance_type + " is not in the operator's table: gpusPerNode " +
                    std::to_string(s.gpus_per_node) + " comes from the spec";
    if (!efa) {
      w += "; efaPerNode was not given, so the pods get no EFA devices, no hugepages-2Mi and no FI_* environment "
           "(set spec.efaPerNode if the type has EFA)";
    } else if (s.efa_per_node > 0) {
      w += "; FI_EFA_USE_DEVICE_RDMA is not set (GPUDirect RDMA support unknown; set it in spec.env if the type "
           "has it)";
    }
    s.warnings.push_back(w);
  }
  if (auto np = OptInt(spec, "nprocPerNode", P, 1, 256)) {
    if (s.gpus_per_node > 0 && *np > s.gpus_per_node) {
      Fail("spec.nprocPerNode", std::to_string(*np) + " exceeds gpusPerNode " + std::to_string(s.gpus_per_node) +
                                    " (one rank per GPU at most)");
    }
    s.nproc_per_node = static_cast<int32_t>(*np);
  } else if (s.gpus_per_node > 0) {
    s.nproc_per_node = s.gpus_per_node;
  } else {
    Fail("spec.nprocPerNode", "required when the job has no GPUs (gpusPerNode 0): the number of CPU ranks per node");
  }
}

// What the pods get besides the trainer: volumes, env, pod metadata, the pod
// template and volume mounts (checked after the template, which adds
// volumes), and the hugepages request = limit rule.
void ParsePodFields(const json& spec, TrainingJobSpec& s) {
  if (const json* vols = Find(spec, "volumes")) {
    if (!vols->is_array()) Fail("spec.volumes", "must be a list");
    std::set<std::string> names;
    for (size_t i = 0; i < vols->size(); ++i) {
      const std::string p = Index("spec.volumes", i);
      const std::string name = ParseVolume((*vols)[i], p);
      if (!names.insert(name).second) Fail(Join(p, "name"), "duplicate volume '" + name + "'");
    }
    s.volumes = *vols;
  }
  if (const json* env = Find(spec, "env")) {
    if (!env->is_array()) Fail("spec.env", "must be a list");
    std::set<std::string> seen;
    for (size_t i = 0; i < env->size(); ++i) {
      EnvVar var = ParseEnvVar((*env)[i], Index("spec.env", i));
      if (!seen.insert(var.name).second) Fail(Index("spec.env", i) + ".name", "duplicate '" + var.name + "'");
      s.env.push_back(std::move(var));
    }
  }
  if (const json* pm = Find(spec, "podMetadata")) {
    RequireObject(*pm, "spec.podMetadata");
    s.pod_labels = StringMap(*pm, "labels", "spec.podMetadata");
    s.pod_annotations = StringMap(*pm, "annotations", "spec.podMetadata");
    ValidateLabels(s.pod_labels, "spec.podMetadata.labels");
    ValidateAnnotations(s.pod_annotations, "spec.podMetadata.annotations");
    for (const auto& [k, v] : s.pod_labels) {
      if (IsOperatorLabel(k)) Fail("spec.podMetadata.labels." + k, "is set by the operator");
    }
    for (const auto& [k, v] : s.pod_annotations) {
      if (IsOperatorAnnotation(k)) Fail("spec.podMetadata.annotations." + k, "is set by the operator");
    }
  }
  // The pod template adds volumes, so mounts are checked after it.
  ParsePodTemplate(Find(spec, "podTemplate"), "spec.podTemplate", &s);
  std::set<std::string> volume_names;
  for (const json& v : s.volumes) volume_names.insert(v.value("name", ""));
  if (const json* mounts = Find(spec, "volumeMounts")) {
    if (!mounts->is_array()) Fail("spec.volumeMounts", "must be a list");
    for (size_t i = 0; i < mounts->size(); ++i) ParseVolumeMount((*mounts)[i], Index("spec.volumeMounts", i), volume_names);
    json all = *mounts;
    for (const json& m : s.volume_mounts) all.push_back(m);
    s.volume_mounts = all;
  }
  auto rq = s.requests.find("hugepages-2Mi");
  auto lm = s.limits.find("hugepages-2Mi");
  if (rq != s.requests.end() && lm != s.limits.end() && rq->second != lm->second) {
    Fail("spec.resources.limits.hugepages-2Mi", "must equal the request (" + rq->second +
                                                    "): Kubernetes requires request = limit for hugepages");
  }
}

TrainingJobSpec ParseSpecOrThrow(const json& spec, const ObjectMeta& meta) {
  const std::string P = "spec";
  RequireObject(spec, P);
  TrainingJobSpec s;

  if (!IsDns1035Label(meta.name)) {
    Fail("metadata.name", "'" + meta.name +
                              "' must be a DNS-1035 label (lower-case letters, digits, '-', starting "
                              "with a letter): it names the headless Service");
  }
  if (meta.name.size() > kMaxJobNameLength) {
    Fail("metadata.name", "'" + meta.name + "' is longer than " + std::to_string(kMaxJobNameLength) +
                              " characters: pod hostnames <name>-node-<rank> must fit in 63");
  }

  s.image = OptString(spec, "image", P, 512).value_or("");
  if (s.image.empty()) Fail("spec.image", "required");
  if (auto p = OptString(spec, "imagePullPolicy", P)) {
    s.image_pull_policy = OneOf(*p, {"Always", "IfNotPresent", "Never"}, "spec.imagePullPolicy");
  }
  s.command = StringList(spec, "command", P, 64);
  if (s.command.empty()) s.command = DefaultCommand();
  s.args = StringList(spec, "args", P, 256);

  s.nodes = static_cast<int32_t>(OptInt(spec, "nodes", P, 1, 2048).value_or(1));
  ParseHardware(spec, s);

  s.master_port = static_cast<int32_t>(OptInt(spec, "masterPort", P, 1024, 65535).value_or(29500));
  s.service_account_name = OptString(spec, "serviceAccountName", P, 253).value_or("");

  if (const json* r = Find(spec, "resources")) {
    RequireObject(*r, "spec.resources");
    s.requests = ParseResourceList(*r, "requests", "spec.resources");
    s.limits = ParseResourceList(*r, "limits", "spec.resources");
  }
  if (const json* shm = Find(spec, "shmSize")) s.shm_size = QuantityValue(*shm, "spec.shmSize");

  s.fault_policy = ParseFaultPolicy(Find(spec, "faultPolicy"), "spec.faultPolicy");
  s.run_policy = ParseRunPolicy(Find(spec, "runPolicy"), "spec.runPolicy");
  s.scheduling = ParseScheduling(Find(spec, "scheduling"), "spec.scheduling", s.fault_policy);

  s.estimate_only = OptBool(spec, "estimateOnly", "spec.estimateOnly").value_or(false);
  s.trainer_config = ParseTrainerConfig(Find(spec, "trainerConfig"), "spec.trainerConfig");
  if (s.trainer_config.inline_yaml) {
    StatusOr<TrainerConfigSummary> summary =
        ValidateTrainerConfig(*s.trainer_config.inline_yaml, s.nodes, s.nproc_per_node);
    if (!summary.ok()) throw FieldError{summary.status()};
    s.trainer_config.summary = summary.value();
  }
  s.elastic = ParseElastic(Find(spec, "elastic"), "spec.elastic", s);
  std::optional<std::string> ckpt = OptString(spec, "checkpointDir", P, 1024);
  if (ckpt && (ckpt->empty() || (*ckpt)[0] != '/')) Fail("spec.checkpointDir", "must be an absolute path");
  const auto& summary = s.trainer_config.summary;
  if (ckpt && summary && summary->checkpoint_dir && *summary->checkpoint_dir != *ckpt) {
    Fail("spec.checkpointDir", "'" + *ckpt + "' disagrees with the trainer config's exp_manager.checkpoint_dir '" +
                                   *summary->checkpoint_dir + "'");
  }
  if (ckpt) {
    s.checkpoint_dir = *ckpt;
  } else if (summary && summary->checkpoint_dir) {
    s.checkpoint_dir = *summary->checkpoint_dir;
  }

  ParsePodFields(spec, s);
  if (MetricsPortOf(s.env) == s.master_port) {
    Fail("spec.masterPort", std::to_string(s.master_port) + " is the trainer's metrics port (" + contract::env::kMetricsPort +
                                ", default " + std::to_string(contract::env::kDefaultMetricsPort) + "); choose another");
  }
  CheckScheduling(s);
  return s;
}

}  // namespace

const char* CleanPodPolicyName(CleanPodPolicy p) {
  switch (p) {
    case CleanPodPolicy::kNone:
      return "None";
    case CleanPodPolicy::kAll:
      return "All";
    case CleanPodPolicy::kRunning:
      break;
  }
  return "Running";
}

std::vector<std::string> DefaultCommand() {
  // The launcher takes its rank count from NPROC_PER_NODE and the trainer its
  // config from HYPERTRAIN_CONFIG (contract/env.h): the pod env says it once.
  return {"hypertrain", "launch", "--", "train"};
}

StatusOr<ObjectMeta> ParseObjectMeta(const json& metadata) {
  try {
    RequireObject(metadata, "metadata");
    ObjectMeta m;
    m.name = OptString(metadata, "name", "metadata", 253).value_or("");
    if (m.name.empty()) Fail("metadata.name", "required");
    m.namespace_ = OptString(metadata, "namespace", "metadata", 63).value_or("");
    if (m.namespace_.empty()) Fail("metadata.namespace", "required (TrainingJob is namespaced)");
    m.uid = OptString(metadata, "uid", "metadata").value_or("");
    m.resource_version = OptString(metadata, "resourceVersion", "metadata").value_or("");
    m.generation = OptInt(metadata, "generation", "metadata", 0, INT64_MAX).value_or(0);
    m.creation_timestamp = OptString(metadata, "creationTimestamp", "metadata").value_or("");
    m.deletion_timestamp = OptString(metadata, "deletionTimestamp", "metadata");
    m.labels = StringMap(metadata, "labels", "metadata");
    m.annotations = StringMap(metadata, "annotations", "metadata");
    return m;
  } catch (const FieldError& e) {
    return e.error;
  }
}

StatusOr<TrainingJobSpec> ParseSpec(const json& spec, const ObjectMeta& meta) {
  try {
    return ParseSpecOrThrow(spec, meta);
  } catch (const FieldError& e) {
    return e.error;
  }
}

}  // namespace hypertrain::api
