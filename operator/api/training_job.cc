#include "operator/api/training_job.h"

#include <algorithm>
#include <regex>
#include <set>

#include "contract/env.h"
#include "operator/api/instance_types.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;

// Parsing inside this file throws FieldError; the public functions catch it
// and return its Status (InvalidArgument "field: message"), so no exception
// crosses the module boundary.
struct FieldError {
  Status error;
};

[[noreturn]] void Fail(const std::string& field, const std::string& message) {
  throw FieldError{InvalidField(field, message)};
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}
std::string Index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Returns obj[key], or nullptr when absent or null.
const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const json& RequireObject(const json& v, const std::string& path) {
  if (!v.is_object()) Fail(path, "must be an object");
  return v;
}

std::optional<std::string> OptString(const json& obj, const char* key, const std::string& path,
                                     size_t max_len = 4096) {
  const json* v = Find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) Fail(Join(path, key), "must be a string");
  std::string s = v->get<std::string>();
  if (s.size() > max_len) Fail(Join(path, key), "longer than " + std::to_string(max_len) + " characters");
  return s;
}

std::optional<int64_t> OptInt(const json& obj, const char* key, const std::string& path, int64_t min,
                              int64_t max) {
  const json* v = Find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) Fail(Join(path, key), "must be an integer");
  int64_t x = v->get<int64_t>();
  if (x < min || x > max) {
    Fail(Join(path, key), std::to_string(x) + " is out of range [" + std::to_string(min) + ", " +
                              std::to_string(max) + "]");
  }
  return x;
}

std::optional<bool> OptBool(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) Fail(Join(path, key), "must be a boolean");
  return v->get<bool>();
}

std::vector<std::string> StringList(const json& obj, const char* key, const std::string& path,
                                    size_t max_items) {
  std::vector<std::string> out;
  const json* v = Find(obj, key);
  if (!v) return out;
  if (!v->is_array()) Fail(Join(path, key), "must be a list of strings");
  if (v->size() > max_items) Fail(Join(path, key), "more than " + std::to_string(max_items) + " items");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) Fail(Index(Join(path, key), i), "must be a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> StringMap(const json& obj, const char* key, const std::string& path) {
  std::map<std::string, std::string> out;
  const json* v = Find(obj, key);
  if (!v) return out;
  if (!v->is_object()) Fail(Join(path, key), "must be a map of strings");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) Fail(Join(Join(path, key), it.key()), "must be a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

std::string OneOf(const std::string& value, const std::vector<std::string>& allowed,
                  const std::string& field) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  Fail(field, "'" + value + "' is not one of " + list);
}

bool IsQuantity(const std::string& s) {
  static const std::regex kQuantity(
      R"(^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$)");
  return std::regex_match(s, kQuantity);
}

std::string QuantityValue(const json& v, const std::string& field) {
  if (v.is_number_integer()) {
    if (v.get<int64_t>() < 0) Fail(field, "must not be negative");
    return std::to_string(v.get<int64_t>());
  }
  if (!v.is_string() || !IsQuantity(v.get<std::string>())) {
    Fail(field, "must be a Kubernetes quantity such as 4, 500m or 64Gi");
  }
  std::string s = v.get<std::string>();
  if (s[0] == '-') Fail(field, "must not be negative");
  return s;
}

bool IsDns1035Label(const std::string& s) {
  static const std::regex kLabel("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, kLabel);
}

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

EnvVar ParseEnvVar(const json& e, const std::string& path) {
  RequireObject(e, path);
  EnvVar var;
  std::optional<std::string> name = OptString(e, "name", path, 256);
  if (!name || name->empty()) Fail(Join(path, "name"), "required");
  static const std::regex kEnvName("^[-._a-zA-Z][-._a-zA-Z0-9]*$");
  if (!std::regex_match(*name, kEnvName)) Fail(Join(path, "name"), "'" + *name + "' is not a valid env name");
  const auto& reserved = contract::ReservedEnvNames();
  if (std::find(reserved.begin(), reserved.end(), *name) != reserved.end()) {
    Fail(Join(path, "name"), "'" + *name +
                                 "' is reserved: the operator or the launcher sets it (see docs/OPERATOR.md)");
  }
  var.name = *name;
  var.value = OptString(e, "value", path, 32768);
  if (const json* vf = Find(e, "valueFrom")) {
    RequireObject(*vf, Join(path, "valueFrom"));
    if (var.value) Fail(path, "value and valueFrom are mutually exclusive");
    var.value_from = *vf;
  }
  return var;
}

void ValidateTolerations(const json& tolerations, const std::string& path, const FaultPolicy& fp) {
  if (!tolerations.is_array()) Fail(path, "must be a list");
  for (size_t i = 0; i < tolerations.size(); ++i) {
    const std::string p = Index(path, i);
    const json& t = RequireObject(tolerations[i], p);
    std::string key = OptString(t, "key", p).value_or("");
    std::string op = OptString(t, "operator", p).value_or("Equal");
    OneOf(op, {"Exists", "Equal"}, Join(p, "operator"));
    OneOf(OptString(t, "effect", p).value_or(""), {"", "NoSchedule", "PreferNoSchedule", "NoExecute"},
          Join(p, "effect"));
    OptString(t, "value", p);
    OptInt(t, "tolerationSeconds", p, INT64_MIN, INT64_MAX);
    if (key.empty()) {
      Fail(Join(p, "key"), "a toleration without a key tolerates every taint, including HyperPod's "
                           "unhealthy-node taint; name the taint key");
    }
    if (key == kHyperPodHealthLabel || key == fp.node_health_label) {
      Fail(Join(p, "key"), "must not tolerate the node-health taint '" + key +
                               "': training pods never run on unhealthy nodes");
    }
  }
}

FaultPolicy ParseFaultPolicy(const json* v, const std::string& path) {
  FaultPolicy fp;
  if (!v) return fp;
  RequireObject(*v, path);
  if (const json* codes = Find(*v, "nonRetryableExitCodes")) {
    const std::string p = Join(path, "nonRetryableExitCodes");
    if (!codes->is_array()) Fail(p, "must be a list of integers");
    std::set<int32_t> seen = {contract::kExitConfigError};  // a config error never succeeds on retry
    for (size_t i = 0; i < codes->size(); ++i) {
      const json& c = (*codes)[i];
      if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > 255) {
        Fail(Index(p, i), "must be an exit code in [1, 255]");
      }
      seen.insert(c.get<int32_t>());
    }
    fp.non_retryable_exit_codes.assign(seen.begin(), seen.end());
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
  return fp;
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
  return rp;
}

Scheduling ParseScheduling(const json* v, const std::string& path, const FaultPolicy& fp) {
  Scheduling s;
  if (!v) return s;
  RequireObject(*v, path);
  s.scheduler_name = OptString(*v, "schedulerName", path, 253).value_or("");
  s.priority_class_name = OptString(*v, "priorityClassName", path, 253).value_or("");
  s.node_selector = StringMap(*v, "nodeSelector", path);
  if (const json* t = Find(*v, "tolerations")) {
    ValidateTolerations(*t, Join(path, "tolerations"), fp);
    s.tolerations = *t;
  }
  if (const json* a = Find(*v, "affinity")) {
    RequireObject(*a, Join(path, "affinity"));
    if (const json* na = Find(*a, "nodeAffinity")) {
      RequireObject(*na, Join(path, "affinity.nodeAffinity"));
      if (const json* req = Find(*na, "requiredDuringSchedulingIgnoredDuringExecution")) {
        const std::string p = Join(path, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
        RequireObject(*req, p);
        const json* terms = Find(*req, "nodeSelectorTerms");
        if (!terms || !terms->is_array()) Fail(Join(p, "nodeSelectorTerms"), "must be a list");
        for (size_t i = 0; i < terms->size(); ++i) RequireObject((*terms)[i], Index(Join(p, "nodeSelectorTerms"), i));
      }
    }
    s.affinity = *a;
  }
  s.termination_grace_period_seconds =
      OptInt(*v, "terminationGracePeriodSeconds", path, 0, 3600).value_or(s.termination_grace_period_seconds);
  return s;
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

  std::optional<InstanceType> it;
  if (auto t = OptString(spec, "instanceType", P, 63)) {
    static const std::regex kType(R"(^ml\.[a-z0-9-]+\.[a-z0-9]+$)");
    if (!std::regex_match(*t, kType)) {
      Fail("spec.instanceType", "'" + *t + "' is not a HyperPod instance type such as ml.p5.48xlarge (ml. prefix)");
    }
    s.instance_type = *t;
    it = LookupInstanceType(*t);
  }
  std::optional<int64_t> gpus = OptInt(spec, "gpusPerNode", P, 0, 16);
  if (gpus) {
    if (it && *gpus > it->gpus) {
      Fail("spec.gpusPerNode", std::to_string(*gpus) + " exceeds the " + std::to_string(it->gpus) +
                                   " GPUs of " + it->name);
    }
    s.gpus_per_node = static_cast<int32_t>(*gpus);
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
  if (auto np = OptInt(spec, "nprocPerNode", P, 1, 256)) {
    if (s.gpus_per_node > 0 && *np > s.gpus_per_node) {
      Fail("spec.nprocPerNode", std::to_string(*np) + " exceeds gpusPerNode " +
                                    std::to_string(s.gpus_per_node) + " (one rank per GPU at most)");
    }
    s.nproc_per_node = static_cast<int32_t>(*np);
  } else if (s.gpus_per_node > 0) {
    s.nproc_per_node = s.gpus_per_node;
  } else {
    Fail(it || s.instance_type.empty() ? "spec.nprocPerNode" : "spec.gpusPerNode",
         s.instance_type.empty() || it
             ? "required when the job has no GPUs (gpusPerNode 0): the number of CPU ranks per node"
             : "required: instance type '" + s.instance_type + "' is not in the operator's table");
  }

  s.master_port = static_cast<int32_t>(OptInt(spec, "masterPort", P, 1024, 65535).value_or(29500));
  s.service_account_name = OptString(spec, "serviceAccountName", P, 253).value_or("");

  if (const json* r = Find(spec, "resources")) {
    RequireObject(*r, "spec.resources");
    s.requests = ParseResourceList(*r, "requests", "spec.resources");
    s.limits = ParseResourceList(*r, "limits", "spec.resources");
    auto rq = s.requests.find("hugepages-2Mi");
    auto lm = s.limits.find("hugepages-2Mi");
    if (rq != s.requests.end() && lm != s.limits.end() && rq->second != lm->second) {
      Fail("spec.resources.limits.hugepages-2Mi", "must equal the request (" + rq->second +
                                                      "): Kubernetes requires request = limit for hugepages");
    }
  }
  if (const json* shm = Find(spec, "shmSize")) s.shm_size = QuantityValue(*shm, "spec.shmSize");

  s.fault_policy = ParseFaultPolicy(Find(spec, "faultPolicy"), "spec.faultPolicy");
  s.run_policy = ParseRunPolicy(Find(spec, "runPolicy"), "spec.runPolicy");
  s.scheduling = ParseScheduling(Find(spec, "scheduling"), "spec.scheduling", s.fault_policy);
  if (!s.instance_type.empty()) {
    auto sel = s.scheduling.node_selector.find(kInstanceTypeLabel);
    if (sel != s.scheduling.node_selector.end() && sel->second != s.instance_type) {
      Fail(std::string("spec.scheduling.nodeSelector.") + kInstanceTypeLabel,
           "'" + sel->second + "' contradicts spec.instanceType '" + s.instance_type + "'");
    }
  }

  s.trainer_config = ParseTrainerConfig(Find(spec, "trainerConfig"), "spec.trainerConfig");
  if (s.trainer_config.inline_yaml) {
    StatusOr<TrainerConfigSummary> summary =
        ValidateTrainerConfig(*s.trainer_config.inline_yaml, s.nodes, s.nproc_per_node);
    if (!summary.ok()) throw FieldError{summary.status()};
    s.trainer_config.summary = summary.value();
  }
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

  std::set<std::string> volume_names;
  if (const json* vols = Find(spec, "volumes")) {
    if (!vols->is_array()) Fail("spec.volumes", "must be a list");
    for (size_t i = 0; i < vols->size(); ++i) {
      const std::string p = Index("spec.volumes", i);
      const json& v = RequireObject((*vols)[i], p);
      std::string name = OptString(v, "name", p, 63).value_or("");
      static const std::regex kVolName("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
      if (!std::regex_match(name, kVolName)) Fail(Join(p, "name"), "'" + name + "' is not a DNS-1123 label");
      if (name == "dshm" || name == "hypertrain-config") Fail(Join(p, "name"), "'" + name + "' is reserved");
      if (!volume_names.insert(name).second) Fail(Join(p, "name"), "duplicate volume '" + name + "'");
      if (v.size() < 2) Fail(p, "needs a volume source (e.g. persistentVolumeClaim)");
    }
    s.volumes = *vols;
  }
  if (const json* mounts = Find(spec, "volumeMounts")) {
    if (!mounts->is_array()) Fail("spec.volumeMounts", "must be a list");
    for (size_t i = 0; i < mounts->size(); ++i) {
      const std::string p = Index("spec.volumeMounts", i);
      const json& m = RequireObject((*mounts)[i], p);
      std::string name = OptString(m, "name", p).value_or("");
      if (!volume_names.count(name)) Fail(Join(p, "name"), "'" + name + "' names no volume in spec.volumes");
      std::string path = OptString(m, "mountPath", p, 1024).value_or("");
      if (path.empty() || path[0] != '/') Fail(Join(p, "mountPath"), "must be an absolute path");
      if (path == "/dev/shm" || path == contract::kConfigMountDir) {
        Fail(Join(p, "mountPath"), "'" + path + "' is mounted by the operator");
      }
      OptString(m, "subPath", p, 1024);
      OptBool(m, "readOnly", p);
    }
    s.volume_mounts = *mounts;
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
  }
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
