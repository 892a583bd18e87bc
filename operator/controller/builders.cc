#include "operator/controller/builders.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

#include "contract/env.h"
#include "contract/pod.h"

namespace hypertrain::controller {
namespace {

using nlohmann::json;
namespace env = contract::env;

json EnvValue(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}
json EnvField(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", path}}}}}};
}

json ObjectMetaFor(const api::ObjectMeta& job, const std::string& name) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", {{"app.kubernetes.io/managed-by", kManagedBy}, {contract::kLabelJobName, job.name}}},
          {"ownerReferences", json::array({OwnerReference(job)})}};
}

}  // namespace

std::string PodName(const std::string& job, int rank) { return job + "-node-" + std::to_string(rank); }
std::string ServiceName(const std::string& job) { return job; }
std::string ConfigMapName(const std::string& job) { return job + "-config"; }
std::string PodGroupName(const api::ObjectMeta& job, int nodes) {
  std::string name =
      job.uid.empty() ? job.name : job.name + "-" + job.uid.substr(0, std::min<size_t>(8, job.uid.size()));
  return nodes > 0 ? name + "-n" + std::to_string(nodes) : name;
}
std::string TrainerServiceAccountName(const std::string& job) { return job + "-trainer"; }
std::string ProgressConfigMapName(const std::string& job) { return job + "-progress"; }
std::string PodServiceAccountName(const api::ObjectMeta& job, const api::TrainingJobSpec& spec) {
  return spec.service_account_name.empty() ? TrainerServiceAccountName(job.name) : spec.service_account_name;
}
std::string MasterAddr(const api::ObjectMeta& job) {
  return PodName(job.name, 0) + "." + ServiceName(job.name) + "." + job.namespace_ + ".svc";
}

json JobSelector(const std::string& job) { return {{contract::kLabelJobName, job}}; }

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

StatusOr<json> BuildConfigMap(const api::ObjectMeta& job, const api::TrainingJobSpec& spec) {
  if (!spec.trainer_config.inline_yaml) {
    return InvalidField("spec.trainerConfig", "refers to ConfigMap '" + spec.trainer_config.config_map->name +
                                                  "'; the operator builds none");
  }
  json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", ObjectMetaFor(job, ConfigMapName(job.name))}};
  cm["data"] = {{contract::kConfigFileName, *spec.trainer_config.inline_yaml}};
  return cm;
}

json BuildTrainerServiceAccount(const api::ObjectMeta& job) {
  return {{"apiVersion", "v1"},
          {"kind", "ServiceAccount"},
          {"metadata", ObjectMetaFor(job, TrainerServiceAccountName(job.name))}};
}

json BuildProgressConfigMap(const api::ObjectMeta& job) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", ObjectMetaFor(job, ProgressConfigMapName(job.name))}};
}

json ProgressRepairPatch(const api::ObjectMeta& job) {
  json meta = ObjectMetaFor(job, ProgressConfigMapName(job.name));
  return {{"metadata",
           {{"labels", meta["labels"]}, {"ownerReferences", meta["ownerReferences"]}, {"finalizers", nullptr}}}};
}

json BuildProgressRole(const api::ObjectMeta& job) {
  // No `get`: the launcher only merge-patches its annotation.
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", ObjectMetaFor(job, ProgressConfigMapName(job.name))},
          {"rules",
           json::array({{{"apiGroups", json::array({""})},
                         {"resources", json::array({"configmaps"})},
                         {"resourceNames", json::array({ProgressConfigMapName(job.name)})},
                         {"verbs", json::array({"patch"})}}})}};
}

json BuildProgressRoleBinding(const api::ObjectMeta& job, const api::TrainingJobSpec& spec) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "RoleBinding"},
          {"metadata", ObjectMetaFor(job, ProgressConfigMapName(job.name))},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", ProgressConfigMapName(job.name)}}},
          {"subjects",
           json::array({{{"kind", "ServiceAccount"},
                         {"name", PodServiceAccountName(job, spec)},
                         {"namespace", job.namespace_}}})}};
}

json DefaultEnv(const api::TrainingJobSpec& spec) {
  json out = json::array({EnvValue(env::kMetricsPort, std::to_string(env::kDefaultMetricsPort))});
  if (spec.gpus_per_node == 0) return out;
  if (spec.efa_per_node > 0) {
    out.push_back(EnvValue(env::kFiProvider, "efa"));
    out.push_back(EnvValue(env::kFiEfaForkSafe, "1"));
    if (spec.gpudirect_rdma) out.push_back(EnvValue(env::kFiEfaUseDeviceRdma, "1"));
  }
  out.push_back(EnvValue(env::kNcclSocketIfname, "^lo"));
  out.push_back(EnvValue(env::kNcclDebug, "WARN"));
  return out;
}

std::optional<contract::ProfileRequest> ProfileOf(const api::ObjectMeta& job, std::string* error) {
  if (error != nullptr) error->clear();
  const auto it = job.annotations.find(contract::kAnnotationProfile);
  if (it == job.annotations.end()) return std::nullopt;
  std::string why;
  std::optional<contract::ProfileRequest> p = contract::DecodeProfile(it->second, &why);
  if (!p && error != nullptr) *error = why;
  return p;
}

json BuildEnv(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank, int attempt) {
  return BuildEnv(job, spec, PodOptions{rank, attempt, {}});
}

json BuildEnv(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, const PodOptions& opts) {
  const int rank = opts.rank;
  const int attempt = opts.restart_attempt;
  const int64_t nodes = opts.Nodes(spec);
  std::set<std::string> user_names;
  for (const api::EnvVar& e : spec.env) user_names.insert(e.name);
  json out = json::array();
  for (const json& d : DefaultEnv(spec)) {
    if (!user_names.count(d["name"].get<std::string>())) out.push_back(d);
  }
  for (const api::EnvVar& e : spec.env) {
    json v = {{"name", e.name}};
    if (e.value) v["value"] = *e.value;
    if (!e.value_from.is_null()) v["valueFrom"] = e.value_from;
    out.push_back(std::move(v));
  }
  const std::string master = MasterAddr(job);
  const std::string port = std::to_string(spec.master_port);
  const std::string nnodes = std::to_string(nodes);
  const std::string node_rank = std::to_string(rank);
  const std::string nproc = std::to_string(spec.nproc_per_node);
  // Every name is the contract's (contract/env.h says who reads each).
  out.push_back(EnvValue(env::kMasterAddr, master));
  out.push_back(EnvValue(env::kMasterPort, port));
  out.push_back(EnvValue(env::kWorldSize, std::to_string(nodes * spec.nproc_per_node)));
  out.push_back(EnvValue(env::kNnodes, nnodes));
  out.push_back(EnvValue(env::kNodeRank, node_rank));
  out.push_back(EnvValue(env::kNprocPerNode, nproc));
  out.push_back(EnvValue(env::kPetNnodes, nnodes));
  out.push_back(EnvValue(env::kPetNodeRank, node_rank));
  out.push_back(EnvValue(env::kPetNprocPerNode, nproc));
  out.push_back(EnvValue(env::kPetMasterAddr, master));
  out.push_back(EnvValue(env::kPetMasterPort, port));
  out.push_back(EnvValue(env::kRestartAttempt, std::to_string(attempt)));
  out.push_back(EnvValue(env::kConfig, contract::kConfigPath));
  if (!spec.checkpoint_dir.empty()) out.push_back(EnvValue(env::kCheckpointDir, spec.checkpoint_dir));
  if (spec.elastic) {
    out.push_back(EnvValue(env::kDesiredNnodes, std::to_string(spec.nodes)));
    if (nodes != spec.nodes && !opts.resize_reason.empty()) {
      out.push_back(EnvValue(env::kResizeReason, opts.resize_reason));
    }
  }
  if (const std::optional<contract::ProfileRequest> p = ProfileOf(job)) {
    out.push_back(EnvValue(env::kProfile, contract::EncodeProfile(*p)));
  }
  // The same number as the pod's terminationGracePeriodSeconds: the budget
  // the trainer saves within after SIGTERM.
  out.push_back(EnvValue(env::kTerminationGraceS,
                         std::to_string(spec.scheduling.termination_grace_period_seconds)));
  out.push_back(EnvField(env::kJobName, std::string("metadata.labels['") + contract::kLabelJobName + "']"));
  out.push_back(EnvField(env::kNamespace, "metadata.namespace"));
  out.push_back(EnvValue(env::kProgressConfigMap, ProgressConfigMapName(job.name)));
  return out;
}

// The rendezvous port, and the launcher's metrics port (named "metrics" for the
// chart's PodMonitor) unless spec.env turns it off or names a non-number.
json ContainerPorts(const api::TrainingJobSpec& spec) {
  json ports = json::array({{{"name", kRendezvousPortName}, {"containerPort", spec.master_port}, {"protocol", "TCP"}}});
  int metrics_port = env::kDefaultMetricsPort;
  for (const api::EnvVar& e : spec.env) {
    if (e.name != env::kMetricsPort) continue;
    metrics_port = 0;
    if (e.value) {
      try {
        size_t used = 0;
        const int p = std::stoi(*e.value, &used);
        if (used == e.value->size() && p > 0 && p < 65536) metrics_port = p;
      } catch (...) {
      }
    }
  }
  if (metrics_port > 0 && metrics_port != spec.master_port) {
    ports.push_back({{"name", kMetricsPortName}, {"containerPort", metrics_port}, {"protocol", "TCP"}});
  }
  return ports;
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

namespace {

// The pod affinity term selecting this attempt's pods of the job (`rank` >= 0:
// only that node rank's pod) under `key`.
json PodTerm(const api::ObjectMeta& job, int attempt, int rank, const std::string& key) {
  json match = {{contract::kLabelJobName, job.name}, {contract::kLabelRestartAttempt, std::to_string(attempt)}};
  if (rank >= 0) match[contract::kLabelNodeRank] = std::to_string(rank);
  return {{"labelSelector", {{"matchLabels", match}}}, {"topologyKey", key}};
}

void Append(json& obj, const char* key, const json& item) {
  json& list = obj[key];
  if (!list.is_array()) list = json::array();
  list.push_back(item);
}

// The topology part of BuildAffinity (see builders.h).
void AddTopology(json& affinity, const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank,
                 int attempt) {
  const api::Topology& t = spec.scheduling.topology;
  if (t.key.empty() || spec.scheduling.gang.provider == api::GangProvider::kKueue) return;
  json& pa = affinity["podAffinity"];
  if (t.required) {
    Append(pa, "requiredDuringSchedulingIgnoredDuringExecution", PodTerm(job, attempt, -1, t.key));
  } else {
    Append(pa, "preferredDuringSchedulingIgnoredDuringExecution",
           {{"weight", 100}, {"podAffinityTerm", PodTerm(job, attempt, -1, t.key)}});
  }
  if (rank == 0) return;
  // Consecutive ranks under the same switch: layer 3 is the closest network
  // node, layer 2 the next; finer than the gang's own domain only.
  const std::string prefix = api::kNetworkNodeLayerLabelPrefix;
  const bool hyperpod = t.key.rfind(prefix, 0) == 0;
  const int gang_layer = hyperpod ? t.key.back() - '0' : 0;
  for (const auto& [layer, weight] : {std::pair{3, 80}, std::pair{2, 40}}) {
    if (!hyperpod || layer <= gang_layer) continue;
    Append(pa, "preferredDuringSchedulingIgnoredDuringExecution",
           {{"weight", weight}, {"podAffinityTerm", PodTerm(job, attempt, rank - 1, prefix + std::to_string(layer))}});
  }
}

}  // namespace

json BuildAffinity(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int rank, int attempt,
                   const std::vector<std::string>& excluded_nodes) {
  json exprs = json::array();
  const api::FaultPolicy& fp = spec.fault_policy;
  if (!fp.healthy_node_values.empty()) {
    exprs.push_back({{"key", fp.node_health_label}, {"operator", "In"}, {"values", fp.healthy_node_values}});
  }
  const json deep_health = {{"key", api::kDeepHealthLabel}, {"operator", "In"}, {"values", {api::kDeepHealthPassed}}};
  if (fp.deep_health_check == api::DeepHealthCheck::kRequired) exprs.push_back(deep_health);
  std::set<std::string> excluded(excluded_nodes.begin(), excluded_nodes.end());
  if (!excluded.empty()) {
    exprs.push_back({{"key", api::kHostnameLabel},
                     {"operator", "NotIn"},
                     {"values", std::vector<std::string>(excluded.begin(), excluded.end())}});
  }
  json affinity = spec.scheduling.affinity.is_object() ? spec.scheduling.affinity : json::object();
  if (!exprs.empty()) {
    json& required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    json& terms = required["nodeSelectorTerms"];
    if (!terms.is_array() || terms.empty()) terms = json::array({json::object()});
    // Terms are ORed: the requirements must hold in each one.
    for (json& term : terms) {
      json& match = term["matchExpressions"];
      if (!match.is_array()) match = json::array();
      for (const json& e : exprs) match.push_back(e);
    }
  }
  if (fp.deep_health_check == api::DeepHealthCheck::kPreferred) {
    Append(affinity["nodeAffinity"], "preferredDuringSchedulingIgnoredDuringExecution",
           {{"weight", 100}, {"preference", {{"matchExpressions", json::array({deep_health})}}}});
  }
  AddTopology(affinity, job, spec, rank, attempt);
  return affinity.empty() ? json() : affinity;
}

namespace {

// The group name of an attempt of `nodes` (see PodGroupName).
std::string GroupOf(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int nodes) {
  return PodGroupName(job, nodes > 0 && nodes != spec.nodes ? nodes : 0);
}

}  // namespace

json BuildPodGroup(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, int size) {
  const api::GangScheduling& g = spec.scheduling.gang;
  if (g.provider != api::GangProvider::kCoscheduling && g.provider != api::GangProvider::kVolcano) return json();
  const int64_t nodes = size > 0 ? size : spec.nodes;
  json pg = {{"kind", "PodGroup"}, {"metadata", ObjectMetaFor(job, GroupOf(job, spec, size))}};
  if (g.provider == api::GangProvider::kCoscheduling) {
    pg["apiVersion"] = gang::kCoschedulingApiVersion;
    pg["spec"] = {{"minMember", nodes}};
    if (spec.run_policy.scheduling_timeout_seconds > 0) {
      pg["spec"]["scheduleTimeoutSeconds"] = spec.run_policy.scheduling_timeout_seconds;
    }
    return pg;
  }
  pg["apiVersion"] = gang::kVolcanoApiVersion;
  pg["spec"] = {{"minMember", nodes}};
  // What the whole gang requests: Volcano enqueues the group only when it fits.
  json per_pod = BuildResources(spec).value("requests", json::object());
  json min_resources = json::object();
  for (auto it = per_pod.begin(); it != per_pod.end(); ++it) {
    const std::string q = it.value().get<std::string>();
    const bool integer = !q.empty() && q.find_first_not_of("0123456789") == std::string::npos;
    // Whole numbers multiply exactly; a quantity with a unit is given per pod
    // times nodes in its own unit when that is a plain suffix.
    if (integer) {
      min_resources[it.key()] = std::to_string(std::stoll(q) * nodes);
    } else {
      const size_t digits = q.find_first_not_of("0123456789");
      if (digits > 0 && q.find('.') == std::string::npos) {
        min_resources[it.key()] = std::to_string(std::stoll(q.substr(0, digits)) * nodes) + q.substr(digits);
      }
    }
  }
  if (!min_resources.empty()) pg["spec"]["minResources"] = min_resources;
  if (!g.queue_name.empty()) pg["spec"]["queue"] = g.queue_name;
  if (!spec.scheduling.priority_class_name.empty()) {
    pg["spec"]["priorityClassName"] = spec.scheduling.priority_class_name;
  }
  return pg;
}

namespace {

// The gang provider's marks on a pod (see builders.h, namespace gang).
void ApplyGang(json& metadata, json& pod_spec, const api::ObjectMeta& job, const api::TrainingJobSpec& spec,
               int nodes) {
  const api::GangScheduling& g = spec.scheduling.gang;
  const std::string group = GroupOf(job, spec, nodes);
  json& labels = metadata["labels"];
  json annotations = metadata.value("annotations", json::object());
  switch (g.provider) {
    case api::GangProvider::kNone:
      return;
    case api::GangProvider::kKueue: {
      labels[gang::kKueueQueueLabel] = g.queue_name;
      labels[gang::kKueueGroupLabel] = group;
      if (!g.priority_class.empty()) labels[gang::kKueuePriorityLabel] = g.priority_class;
      annotations[gang::kKueueTotalCountAnnotation] = std::to_string(nodes);
      annotations[gang::kKueuePodIndexLabelAnnotation] = contract::kLabelNodeRank;
      const api::Topology& t = spec.scheduling.topology;
      if (!t.key.empty()) {
        annotations[t.required ? gang::kKueueRequiredTopology : gang::kKueuePreferredTopology] = t.key;
      }
      // Gated by the operator itself, so no pod of the gang is ever scheduled
      // before Kueue admits all of them (not even when Kueue's webhook does not
      // cover the namespace: then the gang waits, and status says for what).
      pod_spec["schedulingGates"] = json::array({{{"name", gang::kKueueAdmissionGate}}});
      break;
    }
    case api::GangProvider::kCoscheduling:
      labels[gang::kCoschedulingGroupLabel] = group;
      if (!pod_spec.contains("schedulerName")) pod_spec["schedulerName"] = gang::kCoschedulingScheduler;
      break;
    case api::GangProvider::kVolcano:
      annotations[gang::kVolcanoGroupAnnotation] = group;
      pod_spec["schedulerName"] = gang::kVolcanoScheduler;
      break;
  }
  if (!annotations.empty()) metadata["annotations"] = annotations;
}

// The trainer container with the template's extras: every field the operator
// does not set, plus extra ports and envFrom (parsing rejected the conflicts).
void MergeTrainerExtras(json& container, const api::PodTemplate& t) {
  for (auto it = t.trainer.begin(); it != t.trainer.end(); ++it) {
    if (it.key() == "ports") {
      for (const json& port : it.value()) {
        // Parsing refused a port with the rendezvous or metrics port's name or number.
        container["ports"].push_back(port);
      }
    } else if (!container.contains(it.key())) {
      container[it.key()] = it.value();
    }
  }
  if (!t.env_from.empty()) container["envFrom"] = t.env_from;
}

// What Pod Security `restricted` asks of a container, short of runAsNonRoot
// (images such as the AWS and NGC ones run as root; the user says so in
// podTemplate). Each field the template's trainer securityContext sets wins;
// privileged (EFA setups that need it) keeps privilege escalation.
void DefaultSecurityContext(json& container) {
  json sc = container.value("securityContext", json::object());
  if (!sc.is_object()) return;
  if (!sc.contains("allowPrivilegeEscalation") && sc.value("privileged", json(false)) != json(true)) {
    sc["allowPrivilegeEscalation"] = false;
  }
  if (!sc.contains("capabilities")) sc["capabilities"] = {{"drop", json::array({"ALL"})}};
  if (!sc.contains("seccompProfile")) sc["seccompProfile"] = {{"type", "RuntimeDefault"}};
  container["securityContext"] = sc;
}

}  // namespace

Status CheckPodOptions(const api::TrainingJobSpec& spec, const PodOptions& opts) {
  const int nodes = opts.Nodes(spec);
  if (opts.rank < 0 || opts.rank >= nodes) {
    return InvalidField("rank", std::to_string(opts.rank) + " is outside [0, " + std::to_string(nodes) + ")");
  }
  if (opts.restart_attempt < 0) return InvalidField("restart_attempt", "must be >= 0");
  return Status::Ok();
}

StatusOr<json> BuildPod(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, const PodOptions& opts) {
  HT_RETURN_IF_ERROR(CheckPodOptions(spec, opts));
  const int nodes = opts.Nodes(spec);
  const std::string name = PodName(job.name, opts.rank);

  json labels = json::object();
  for (const auto& [k, v] : spec.pod_labels) labels[k] = v;
  labels["app.kubernetes.io/name"] = "hypertrain";
  labels["app.kubernetes.io/managed-by"] = kManagedBy;
  labels[contract::kLabelJobName] = job.name;
  labels[contract::kLabelNodeRank] = std::to_string(opts.rank);
  labels[contract::kLabelRestartAttempt] = std::to_string(opts.restart_attempt);
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
                                             {"path", contract::kConfigFileName}}})}};
  }
  json volumes = json::array({{{"name", kShmVolume}, {"emptyDir", shm}},
                              {{"name", kConfigVolume}, {"configMap", config_source}}});
  for (const json& v : spec.volumes) volumes.push_back(v);
  json mounts = json::array({{{"name", kShmVolume}, {"mountPath", "/dev/shm"}},
                             {{"name", kConfigVolume}, {"mountPath", contract::kConfigMountDir}, {"readOnly", true}}});
  for (const json& m : spec.volume_mounts) mounts.push_back(m);

  json container = {{"name", kContainerName},
                    {"image", spec.image},
                    {"imagePullPolicy", spec.image_pull_policy},
                    {"command", spec.command},
                    {"env", BuildEnv(job, spec, opts)},
                    {"ports", ContainerPorts(spec)},
                    {"volumeMounts", mounts},
                    // The launcher explains a signal death in /dev/termination-log;
                    // other failures show the log's last lines (the trainer's error).
                    {"terminationMessagePolicy", "FallbackToLogsOnError"}};
  if (!spec.args.empty()) container["args"] = spec.args;
  json resources = BuildResources(spec);
  if (!resources.empty()) container["resources"] = resources;
  MergeTrainerExtras(container, spec.pod_template);
  DefaultSecurityContext(container);

  // The template's pod-level fields first; the operator's own fields over them
  // (parsing rejected a template that sets one of them).
  json pod_spec = spec.pod_template.spec;
  pod_spec["hostname"] = name;
  pod_spec["subdomain"] = ServiceName(job.name);
  pod_spec["restartPolicy"] = "Never";
  if (!pod_spec.contains("enableServiceLinks")) pod_spec["enableServiceLinks"] = false;
  pod_spec["terminationGracePeriodSeconds"] = spec.scheduling.termination_grace_period_seconds;
  json containers = json::array({container});
  for (const json& c : spec.pod_template.sidecars) containers.push_back(c);
  pod_spec["containers"] = containers;
  if (!spec.pod_template.init_containers.empty()) pod_spec["initContainers"] = spec.pod_template.init_containers;
  pod_spec["volumes"] = volumes;
  json node_selector = json::object();
  for (const auto& [k, v] : spec.scheduling.node_selector) node_selector[k] = v;
  if (!spec.instance_type.empty()) node_selector[api::kInstanceTypeLabel] = spec.instance_type;
  if (!node_selector.empty()) pod_spec["nodeSelector"] = node_selector;
  json affinity = BuildAffinity(job, spec, opts.rank, opts.restart_attempt, opts.excluded_nodes);
  if (!affinity.is_null()) pod_spec["affinity"] = affinity;
  if (!spec.scheduling.tolerations.empty()) pod_spec["tolerations"] = spec.scheduling.tolerations;
  if (!spec.scheduling.scheduler_name.empty()) pod_spec["schedulerName"] = spec.scheduling.scheduler_name;
  if (!spec.scheduling.priority_class_name.empty()) {
    pod_spec["priorityClassName"] = spec.scheduling.priority_class_name;
  }
  pod_spec["serviceAccountName"] = PodServiceAccountName(job, spec);
  ApplyGang(metadata, pod_spec, job, spec, nodes);

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
