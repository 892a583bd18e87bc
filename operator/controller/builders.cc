#include "operator/controller/builders.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

namespace hypertrain::controller {
namespace {

using nlohmann::json;

json EnvValue(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}
json EnvField(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", path}}}}}};
}

json ObjectMetaFor(const api::ObjectMeta& job, const std::string& name) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", {{"app.kubernetes.io/managed-by", kManagedBy}, {api::kLabelJobName, job.name}}},
          {"ownerReferences", json::array({OwnerReference(job)})}};
}

}  // namespace

std::string PodName(const std::string& job, int rank) { return job + "-node-" + std::to_string(rank); }
std::string ServiceName(const std::string& job) { return job; }
std::string ConfigMapName(const std::string& job) { return job + "-config"; }
std::string MasterAddr(const api::ObjectMeta& job) {
  return PodName(job.name, 0) + "." + ServiceName(job.name) + "." + job.namespace_ + ".svc";
}

json JobSelector(const std::string& job) { return {{api::kLabelJobName, job}}; }

json OwnerReference(const api::ObjectMeta& job) {
  return {{"apiVersion", api::kApiVersion}, {"kind", api::kKind},       {"name", job.name},
          {"uid", job.uid},                 {"controller", true},       {"blockOwnerDeletion", true}};
}

json BuildService(const api::ObjectMeta& job, const api::TrainingJobSpec& spec) {
  json svc = {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", ObjectMetaFor(job, ServiceName(job.name))}};
  svc["spec"] = {{"clusterIP", "None"},
                 {"publishNotReadyAddresses", true},
                 {"selector", JobSelector(job.name)},
                 {"ports", json::array({{{"name", kRendezvousPortName},
                                         {"port", spec.master_port},
                                         {"targetPort", spec.master_port},
                                         {"protocol", "TCP"}}})}};
  return svc;
}

api::Result<json> BuildConfigMap(const api::ObjectMeta& job, const api::TrainingJobSpec& spec) {
  if (!spec.trainer_config.inline_yaml) {
    return api::Error{"spec.trainerConfig", "refers to ConfigMap '" + spec.trainer_config.config_map->name +
                                                "'; the operator builds none"};
  }
  json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", ObjectMetaFor(job, ConfigMapName(job.name))}};
  cm["data"] = {{api::kConfigFileName, *spec.trainer_config.inline_yaml}};
  return cm;
}

json DefaultEnv(const api::TrainingJobSpec& spec) {
  json env = json::array();
  if (spec.gpus_per_node == 0) return env;
  if (spec.efa_per_node > 0) {
    env.push_back(EnvValue("FI_PROVIDER", "efa"));
    env.push_back(EnvValue("FI_EFA_FORK_SAFE", "1"));
    if (spec.gpudirect_rdma) env.push_back(EnvValue("FI_EFA_USE_DEVICE_RDMA", "1"));
  }
  env.push_back(EnvValue("NCCL_SOCKET_IFNAME", "^lo"));
  env.push_back(EnvValue("NCCL_DEBUG", "WARN"));
  return env;
}

json BuildEnv(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank, int attempt) {
  std::set<std::string> user_names;
  for (const api::EnvVar& e : spec.env) user_names.insert(e.name);
  json env = json::array();
  for (const json& d : DefaultEnv(spec)) {
    if (!user_names.count(d["name"].get<std::string>())) env.push_back(d);
  }
  for (const api::EnvVar& e : spec.env) {
    json v = {{"name", e.name}};
    if (e.value) v["value"] = *e.value;
    if (!e.value_from.is_null()) v["valueFrom"] = e.value_from;
    env.push_back(std::move(v));
  }
  const std::string master = MasterAddr(job);
  const std::string port = std::to_string(spec.master_port);
  const std::string nnodes = std::to_string(spec.nodes);
  const std::string node_rank = std::to_string(rank);
  const std::string nproc = std::to_string(spec.nproc_per_node);
  env.push_back(EnvValue("MASTER_ADDR", master));
  env.push_back(EnvValue("MASTER_PORT", port));
  env.push_back(EnvValue("WORLD_SIZE", std::to_string(spec.WorldSize())));
  env.push_back(EnvValue("NNODES", nnodes));
  env.push_back(EnvValue("NODE_RANK", node_rank));
  env.push_back(EnvValue("NPROC_PER_NODE", nproc));
  env.push_back(EnvValue("PET_NNODES", nnodes));
  env.push_back(EnvValue("PET_NODE_RANK", node_rank));
  env.push_back(EnvValue("PET_NPROC_PER_NODE", nproc));
  env.push_back(EnvValue("PET_MASTER_ADDR", master));
  env.push_back(EnvValue("PET_MASTER_PORT", port));
  env.push_back(EnvValue("RESTART_ATTEMPT", std::to_string(attempt)));
  env.push_back(EnvValue("HYPERTRAIN_CONFIG", api::kConfigPath));
  if (!spec.checkpoint_dir.empty()) env.push_back(EnvValue("HYPERTRAIN_CHECKPOINT_DIR", spec.checkpoint_dir));
  env.push_back(EnvField("HYPERTRAIN_JOB_NAME", std::string("metadata.labels['") + api::kLabelJobName + "']"));
  env.push_back(EnvField("HYPERTRAIN_NAMESPACE", "metadata.namespace"));
  env.push_back(EnvField("HYPERTRAIN_POD_NAME", "metadata.name"));
  env.push_back(EnvField("HYPERTRAIN_NODE_NAME", "spec.nodeName"));
  return env;
}

json BuildResources(const api::TrainingJobSpec& spec) {
  json requests = json::object();
  json limits = json::object();
  for (const auto& [k, v] : spec.requests) requests[k] = v;
  for (const auto& [k, v] : spec.limits) limits[k] = v;
  auto both = [&](const std::string& k, const std::string& v) {
    requests[k] = v;
    limits[k] = v;
  };
  if (spec.gpus_per_node > 0) both("nvidia.com/gpu", std::to_string(spec.gpus_per_node));
  if (spec.efa_per_node > 0) both("vpc.amazonaws.com/efa", std::to_string(spec.efa_per_node));
  std::string hugepages;
  if (auto it = spec.requests.find("hugepages-2Mi"); it != spec.requests.end()) {
    hugepages = it->second;
  } else if (auto lt = spec.limits.find("hugepages-2Mi"); lt != spec.limits.end()) {
    hugepages = lt->second;
  } else if (spec.efa_per_node > 0) {
    hugepages = kDefaultHugepages;
  }
  if (!hugepages.empty()) {
    both("hugepages-2Mi", hugepages);
    bool cpu_or_memory = false;
    for (const char* k : {"cpu", "memory"}) cpu_or_memory |= requests.contains(k) || limits.contains(k);
    if (!cpu_or_memory) requests["cpu"] = "1";
  }
  json out = json::object();
  if (!requests.empty()) out["requests"] = requests;
  if (!limits.empty()) out["limits"] = limits;
  return out;
}

json BuildAffinity(const api::TrainingJobSpec& spec, const std::vector<std::string>& excluded_nodes) {
  json exprs = json::array();
  const api::FaultPolicy& fp = spec.fault_policy;
  if (!fp.healthy_node_values.empty()) {
    exprs.push_back({{"key", fp.node_health_label}, {"operator", "In"}, {"values", fp.healthy_node_values}});
  }
  std::set<std::string> excluded(excluded_nodes.begin(), excluded_nodes.end());
  if (!excluded.empty()) {
    exprs.push_back({{"key", api::kHostnameLabel},
                     {"operator", "NotIn"},
                     {"values", std::vector<std::string>(excluded.begin(), excluded.end())}});
  }
  json affinity = spec.scheduling.affinity.is_object() ? spec.scheduling.affinity : json();
  if (exprs.empty()) return affinity;
  if (affinity.is_null()) affinity = json::object();
  json& required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = json::array({json::object()});
  // Terms are ORed: the requirements must hold in each one.
  for (json& term : terms) {
    json& match = term["matchExpressions"];
    if (!match.is_array()) match = json::array();
    for (const json& e : exprs) match.push_back(e);
  }
  return affinity;
}

api::Result<json> BuildPod(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, const PodOptions& opts) {
  if (opts.rank < 0 || opts.rank >= spec.nodes) {
    return api::Error{"rank", std::to_string(opts.rank) + " is outside [0, " + std::to_string(spec.nodes) + ")"};
  }
  if (opts.restart_attempt < 0) return api::Error{"restart_attempt", "must be >= 0"};
  const std::string name = PodName(job.name, opts.rank);

  json labels = json::object();
  for (const auto& [k, v] : spec.pod_labels) labels[k] = v;
  labels["app.kubernetes.io/name"] = "hypertrain";
  labels["app.kubernetes.io/managed-by"] = kManagedBy;
  labels[api::kLabelJobName] = job.name;
  labels[api::kLabelNodeRank] = std::to_string(opts.rank);
  labels[api::kLabelRestartAttempt] = std::to_string(opts.restart_attempt);
  json metadata = {{"name", name},
                   {"namespace", job.namespace_},
                   {"labels", labels},
                   {"ownerReferences", json::array({OwnerReference(job)})}};
  if (!spec.pod_annotations.empty()) metadata["annotations"] = spec.pod_annotations;

  json shm = {{"medium", "Memory"}};
  if (!spec.shm_size.empty()) shm["sizeLimit"] = spec.shm_size;
  json config_source;
  if (spec.trainer_config.inline_yaml) {
    config_source = {{"name", ConfigMapName(job.name)}};
  } else {
    config_source = {{"name", spec.trainer_config.config_map->name},
                     {"items", json::array({{{"key", spec.trainer_config.config_map->key},
                                             {"path", api::kConfigFileName}}})}};
  }
  json volumes = json::array({{{"name", kShmVolume}, {"emptyDir", shm}},
                              {{"name", kConfigVolume}, {"configMap", config_source}}});
  for (const json& v : spec.volumes) volumes.push_back(v);
  json mounts = json::array({{{"name", kShmVolume}, {"mountPath", "/dev/shm"}},
                             {{"name", kConfigVolume}, {"mountPath", api::kConfigMountDir}, {"readOnly", true}}});
  for (const json& m : spec.volume_mounts) mounts.push_back(m);

  json container = {{"name", kContainerName},
                    {"image", spec.image},
                    {"imagePullPolicy", spec.image_pull_policy},
                    {"command", spec.command},
                    {"env", BuildEnv(job, spec, opts.rank, opts.restart_attempt)},
                    {"ports", json::array({{{"name", kRendezvousPortName},
                                            {"containerPort", spec.master_port},
                                            {"protocol", "TCP"}}})},
                    {"volumeMounts", mounts}};
  if (!spec.args.empty()) container["args"] = spec.args;
  json resources = BuildResources(spec);
  if (!resources.empty()) container["resources"] = resources;

  json pod_spec = {{"hostname", name},
                   {"subdomain", ServiceName(job.name)},
                   {"restartPolicy", "Never"},
                   {"enableServiceLinks", false},
                   {"terminationGracePeriodSeconds", spec.scheduling.termination_grace_period_seconds},
                   {"containers", json::array({container})},
                   {"volumes", volumes}};
  json node_selector = json::object();
  for (const auto& [k, v] : spec.scheduling.node_selector) node_selector[k] = v;
  if (!spec.instance_type.empty()) node_selector[api::kInstanceTypeLabel] = spec.instance_type;
  if (!node_selector.empty()) pod_spec["nodeSelector"] = node_selector;
  json affinity = BuildAffinity(spec, opts.excluded_nodes);
  if (!affinity.is_null()) pod_spec["affinity"] = affinity;
  if (!spec.scheduling.tolerations.empty()) pod_spec["tolerations"] = spec.scheduling.tolerations;
  if (!spec.scheduling.scheduler_name.empty()) pod_spec["schedulerName"] = spec.scheduling.scheduler_name;
  if (!spec.scheduling.priority_class_name.empty()) {
    pod_spec["priorityClassName"] = spec.scheduling.priority_class_name;
  }
  if (!spec.service_account_name.empty()) pod_spec["serviceAccountName"] = spec.service_account_name;

  return json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", pod_spec}};
}

json BuildEvent(const api::ObjectMeta& job, EventType type, const std::string& reason, const std::string& message,
                const std::string& now, const std::string& reporting_instance) {
  const size_t h = std::hash<std::string>{}(job.uid + "\n" + reason + "\n" + message + "\n" + now);
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%016zx", h);
  std::string msg = message.size() > 1024 ? message.substr(0, 1021) + "..." : message;
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", job.name + "." + suffix}, {"namespace", job.namespace_}}},
          {"involvedObject",
           {{"apiVersion", api::kApiVersion},
            {"kind", api::kKind},
            {"name", job.name},
            {"namespace", job.namespace_},
            {"uid", job.uid}}},
          {"reason", reason},
          {"message", msg},
          {"type", type == EventType::kWarning ? "Warning" : "Normal"},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"count", 1},
          {"source", {{"component", kManagedBy}}},
          {"reportingComponent", "hypertrain.dev/operator"},
          {"reportingInstance", reporting_instance}};
}

}  // namespace hypertrain::controller
