// The trainer container's env, volumes and mounts, and spec.podTemplate: what
// a user adds to the operator's pod. Fields the operator owns are rejected
// naming the field and where the spec says the same thing, so the pods the
// operator creates are never refused by the API server one by one.
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "contract/env.h"
#include "contract/pod.h"
#include "operator/api/parse_util.h"
#include "operator/api/spec_parts.h"

namespace hypertrain::api::parse {
namespace {

constexpr char kTrainerContainer[] = "trainer";        // controller::kContainerName
constexpr char kRendezvousPortName[] = "rendezvous";   // controller::kRendezvousPortName
constexpr char kMetricsPortName[] = "metrics";         // controller::kMetricsPortName
const std::set<std::string> kReservedVolumes = {"dshm", "hypertrain-config"};

// Pod-level fields of the overlay the operator sets, with where to say it instead.
const std::map<std::string, std::string>& OwnedPodFields() {
  static const std::map<std::string, std::string> k = {
      {"hostname", "the operator sets it: pods are <job>-node-<rank> under the job's headless Service"},
      {"subdomain", "the operator sets it: pods are <job>-node-<rank> under the job's headless Service"},
      {"nodeName", "pods are placed by the scheduler; use spec.scheduling.nodeSelector or affinity"},
      {"restartPolicy", "the operator sets Never: a failed pod restarts the whole gang"},
      {"schedulingGates", "the operator sets them (gang provider kueue)"},
      {"serviceAccountName", "set spec.serviceAccountName"},
      {"serviceAccount", "set spec.serviceAccountName"},
      {"nodeSelector", "set spec.scheduling.nodeSelector"},
      {"affinity", "set spec.scheduling.affinity (merged with the operator's node-health and topology terms)"},
      {"tolerations", "set spec.scheduling.tolerations"},
      {"schedulerName", "set spec.scheduling.schedulerName"},
      {"priorityClassName", "set spec.scheduling.priorityClassName"},
      {"priority", "the API server sets it from spec.scheduling.priorityClassName"},
      {"terminationGracePeriodSeconds", "set spec.scheduling.terminationGracePeriodSeconds"},
  };
  return k;
}

// Fields of the trainer container the operator owns.
const std::map<std::string, std::string>& OwnedTrainerFields() {
  static const std::map<std::string, std::string> k = {
      {"image", "set spec.image"},
      {"imagePullPolicy", "set spec.imagePullPolicy"},
      {"command", "set spec.command (the default runs the launcher)"},
      {"args", "set spec.args"},
  };
  return k;
}

ResourceList Resources(const json& obj, const char* key, const std::string& path, bool gpus_allowed) {
  ResourceList out;
  const json* v = Find(obj, key);
  if (!v) return out;
  const std::string p = Join(path, key);
  RequireObject(*v, p);
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string field = Join(p, it.key());
    if (it.key() == "nvidia.com/gpu" || it.key() == "vpc.amazonaws.com/efa") {
      Fail(field, gpus_allowed ? "set spec.gpusPerNode / spec.efaPerNode; the operator owns this resource"
                               : "GPUs and EFA devices belong to the trainer container (spec.gpusPerNode, efaPerNode)");
    }
    out[it.key()] = QuantityValue(it.value(), field);
  }
  return out;
}

void MergeResources(const ResourceList& extra, ResourceList* into, const std::string& path) {
  for (const auto& [k, v] : extra) {
    if (into->count(k)) Fail(Join(path, k), "is also set in spec.resources; say it once");
    (*into)[k] = v;
  }
}

// Every template container shares the pod's network: no port of it may be the
// rendezvous or metrics port, by number (containerPort or hostPort) or by name
// (the PodMonitor scrapes the port named "metrics").
void ParsePorts(const json& c, const std::string& path, const TrainingJobSpec& s) {
  const json* ports = Find(c, "ports");
  if (!ports) return;
  if (!ports->is_array()) Fail(Join(path, "ports"), "must be a list");
  const int metrics_port = MetricsPortOf(s.env);
  for (size_t i = 0; i < ports->size(); ++i) {
    const std::string p = Index(Join(path, "ports"), i);
    const json& port = RequireObject((*ports)[i], p);
    const std::optional<int64_t> number = OptInt(port, "containerPort", p, 1, 65535);
    if (!number) Fail(Join(p, "containerPort"), "required");
    const std::optional<int64_t> host = OptInt(port, "hostPort", p, 0, 65535);
    for (const auto& [key, value] : {std::pair{"containerPort", number}, std::pair{"hostPort", host}}) {
      if (value && *value == s.master_port) {
        Fail(Join(p, key), std::to_string(s.master_port) + " is the rendezvous port (spec.masterPort)");
      }
      if (value && metrics_port > 0 && *value == metrics_port) {
        Fail(Join(p, key), std::to_string(metrics_port) + " is the trainer's metrics port (" +
                               contract::env::kMetricsPort + ", default " +
                               std::to_string(contract::env::kDefaultMetricsPort) + ")");
      }
    }
    const std::string name = OptString(port, "name", p, 15).value_or("");
    if (name == kRendezvousPortName || name == kMetricsPortName) {
      Fail(Join(p, "name"), "'" + name + "' is the operator's port name");
    }
  }
}

// Sidecar and init containers: a name, an image, valid env names, a sidecar's
// ports (an init container has exited before the trainer binds its ports);
// their mounts are checked once every volume is known.
void ParseOtherContainer(const json& c, const std::string& path, const TrainingJobSpec& s, bool sidecar) {
  if (!OptString(c, "image", path, 512).value_or("").size()) Fail(Join(path, "image"), "required");
  if (const json* env = Find(c, "env")) {
    if (!env->is_array()) Fail(Join(path, "env"), "must be a list");
    static const std::regex kEnvName("^[-._a-zA-Z][-._a-zA-Z0-9]*$");
    for (size_t i = 0; i < env->size(); ++i) {
      const std::string p = Index(Join(path, "env"), i);
      const std::string name = OptString(RequireObject((*env)[i], p), "name", p, 256).value_or("");
      if (!std::regex_match(name, kEnvName)) Fail(Join(p, "name"), "'" + name + "' is not a valid env name");
    }
  }
  if (const json* r = Find(c, "resources")) {
    RequireObject(*r, Join(path, "resources"));
    Resources(*r, "requests", Join(path, "resources"), false);
    Resources(*r, "limits", Join(path, "resources"), false);
  }
  if (sidecar) ParsePorts(c, path, s);
}

// The overlay of the trainer container: env, envFrom, mounts and resources
// merge into the spec's; the rest is kept for the builder.
void ParseTrainerOverlay(const json& c, const std::string& path, TrainingJobSpec* s, json* mounts) {
  for (const auto& [field, why] : OwnedTrainerFields()) {
    if (Find(c, field.c_str())) Fail(Join(path, field), why);
  }
  json rest = c;
  rest.erase("name");
  if (const json* env = Find(c, "env")) {
    if (!env->is_array()) Fail(Join(path, "env"), "must be a list");
    std::set<std::string> seen;
    for (const EnvVar& e : s->env) seen.insert(e.name);
    for (size_t i = 0; i < env->size(); ++i) {
      const std::string p = Index(Join(path, "env"), i);
      EnvVar var = ParseEnvVar((*env)[i], p);
      if (!seen.insert(var.name).second) Fail(Join(p, "name"), "'" + var.name + "' is also set in spec.env");
      s->env.push_back(std::move(var));
    }
    rest.erase("env");
  }
  if (const json* from = Find(c, "envFrom")) {
    if (!from->is_array()) Fail(Join(path, "envFrom"), "must be a list");
    for (size_t i = 0; i < from->size(); ++i) {
      const std::string p = Index(Join(path, "envFrom"), i);
      const json& f = RequireObject((*from)[i], p);
      const int sources = (Find(f, "configMapRef") ? 1 : 0) + (Find(f, "secretRef") ? 1 : 0);
      if (sources != 1) Fail(p, "needs exactly one of configMapRef or secretRef");
      for (const char* ref : {"configMapRef", "secretRef"}) {
        if (const json* r = Find(f, ref)) {
          if (OptString(RequireObject(*r, Join(p, ref)), "name", Join(p, ref), 253).value_or("").empty()) {
            Fail(Join(Join(p, ref), "name"), "required");
          }
        }
      }
      OptString(f, "prefix", p, 253);
    }
    s->pod_template.env_from = *from;
    rest.erase("envFrom");
  }
  if (const json* m = Find(c, "volumeMounts")) {
    if (!m->is_array()) Fail(Join(path, "volumeMounts"), "must be a list");
    for (size_t i = 0; i < m->size(); ++i) mounts->push_back({{"path", Index(Join(path, "volumeMounts"), i)}, {"mount", (*m)[i]}});
    rest.erase("volumeMounts");
  }
  if (const json* r = Find(c, "resources")) {
    const std::string p = Join(path, "resources");
    RequireObject(*r, p);
    MergeResources(Resources(*r, "requests", p, true), &s->requests, Join(p, "requests"));
    MergeResources(Resources(*r, "limits", p, true), &s->limits, Join(p, "limits"));
    rest.erase("resources");
  }
  ParsePorts(c, path, *s);
  s->pod_template.trainer = rest;
}

}  // namespace

int MetricsPortOf(const std::vector<EnvVar>& env_vars) {
  int port = contract::env::kDefaultMetricsPort;
  for (const EnvVar& e : env_vars) {
    if (e.name != contract::env::kMetricsPort) continue;
    port = 0;  // "0", a reference or a non-number: no metrics port
    if (e.value && !e.value->empty() && e.value->size() <= 5 &&
        e.value->find_first_not_of("0123456789") == std::string::npos) {
      port = std::stoi(*e.value);
      if (port > 65535) port = 0;
    }
  }
  return port;
}

bool IsOperatorLabel(const std::string& key) {
  static const std::set<std::string> kExact = {
      "app.kubernetes.io/name",       "app.kubernetes.io/managed-by",  "kueue.x-k8s.io/queue-name",
      "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/priority-class", "scheduling.x-k8s.io/pod-group"};
  return key.rfind("hypertrain.dev/", 0) == 0 || kExact.count(key) > 0;
}

bool IsOperatorAnnotation(const std::string& key) {
  static const std::set<std::string> kExact = {
      "kueue.x-k8s.io/pod-group-total-count",       "kueue.x-k8s.io/pod-group-pod-index-label",
      "kueue.x-k8s.io/podset-required-topology",    "kueue.x-k8s.io/podset-preferred-topology",
      "scheduling.k8s.io/group-name",               "scheduling.volcano.sh/queue-name"};
  return key.rfind("hypertrain.dev/", 0) == 0 || kExact.count(key) > 0;
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
    const std::string p = Join(path, "valueFrom");
    RequireObject(*vf, p);
    if (var.value) Fail(path, "value and valueFrom are mutually exclusive");
    int sources = 0;
    for (auto it = vf->begin(); it != vf->end(); ++it) {
      static const std::set<std::string> kSources = {"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"};
      if (!kSources.count(it.key())) Fail(Join(p, it.key()), "unknown source (fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef)");
      RequireObject(it.value(), Join(p, it.key()));
      ++sources;
    }
    if (sources != 1) Fail(p, "needs exactly one source");
    var.value_from = *vf;
  }
  return var;
}

std::string ParseVolume(const json& vol, const std::string& p) {
  const json& v = RequireObject(vol, p);
  std::string name = OptString(v, "name", p, 63).value_or("");
  if (!IsDns1123Label(name)) Fail(Join(p, "name"), "'" + name + "' is not a DNS-1123 label");
  if (kReservedVolumes.count(name)) Fail(Join(p, "name"), "'" + name + "' is reserved");
  // core/v1 VolumeSource of Kubernetes 1.26 (the CRD's generated schema).
  static const std::set<std::string> kSources = {
      "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi", "downwardAPI",
      "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs",
      "hostPath", "iscsi", "nfs", "persistentVolumeClaim", "photonPersistentDisk", "portworxVolume", "projected",
      "quobyte", "rbd", "scaleIO", "secret", "storageos", "vsphereVolume"};
  std::vector<std::string> sources;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "name") continue;
    if (!kSources.count(it.key())) {
      Fail(Join(p, it.key()), "unknown field: not a core/v1 volume source (e.g. persistentVolumeClaim, emptyDir)");
    }
    sources.push_back(it.key());
  }
  if (sources.empty()) Fail(p, "needs a volume source (e.g. persistentVolumeClaim)");
  if (sources.size() > 1) Fail(p, "has " + std::to_string(sources.size()) + " volume sources (" + sources[0] + ", " +
                                      sources[1] + "); a volume has exactly one");
  return name;
}

void ParseVolumeMount(const json& mount, const std::string& p, const std::set<std::string>& volumes) {
  const json& m = RequireObject(mount, p);
  std::string name = OptString(m, "name", p).value_or("");
  if (!volumes.count(name)) Fail(Join(p, "name"), "'" + name + "' names no volume of the pod (spec.volumes or spec.podTemplate.spec.volumes)");
  std::string path = OptString(m, "mountPath", p, 1024).value_or("");
  if (path.empty() || path[0] != '/') Fail(Join(p, "mountPath"), "must be an absolute path");
  if (path == "/dev/shm" || path == contract::kConfigMountDir) {
    Fail(Join(p, "mountPath"), "'" + path + "' is mounted by the operator");
  }
  OptString(m, "subPath", p, 1024);
  OptBool(m, "readOnly", p);
}

namespace {

// The template's labels and annotations join spec.podMetadata's.
void ParseTemplateMetadata(const json& meta, const std::string& mp, TrainingJobSpec* s) {
  RequireObject(meta, mp);
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (it.key() != "labels" && it.key() != "annotations") {
      Fail(Join(mp, it.key()), "only labels and annotations are taken from the template's metadata");
    }
  }
  const auto labels = StringMap(meta, "labels", mp);
  const auto annotations = StringMap(meta, "annotations", mp);
  ValidateLabels(labels, Join(mp, "labels"));
  ValidateAnnotations(annotations, Join(mp, "annotations"));
  for (const auto& [k, val] : labels) {
    const std::string f = Join(Join(mp, "labels"), k);
    if (IsOperatorLabel(k)) Fail(f, "is set by the operator");
    auto had = s->pod_labels.find(k);
    if (had != s->pod_labels.end() && had->second != val) Fail(f, "conflicts with spec.podMetadata.labels");
    s->pod_labels[k] = val;
  }
  for (const auto& [k, val] : annotations) {
    const std::string f = Join(Join(mp, "annotations"), k);
    if (IsOperatorAnnotation(k)) Fail(f, "is set by the operator");
    auto had = s->pod_annotations.find(k);
    if (had != s->pod_annotations.end() && had->second != val) Fail(f, "conflicts with spec.podMetadata.annotations");
    s->pod_annotations[k] = val;
  }
}

// containers and initContainers: "trainer" is an overlay of the operator's
// container, the rest are sidecars and init containers; every mount names a
// volume of the pod (`volumes`).
void ParseTemplateContainers(const json& spec, const std::string& sp, const std::set<std::string>& volumes,
                             TrainingJobSpec* s) {
  json trainer_mounts = json::array();
  std::vector<std::pair<std::string, const json*>> others;  // path, container
  std::set<std::string> names = {kTrainerContainer};
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = Find(spec, list);
    if (!cs) continue;
    if (!cs->is_array()) Fail(Join(sp, list), "must be a list");
    for (size_t i = 0; i < cs->size(); ++i) {
      const std::string p = Index(Join(sp, list), i);
      const json& c = RequireObject((*cs)[i], p);
      const std::string name = OptString(c, "name", p, 63).value_or("");
      if (!IsDns1123Label(name)) Fail(Join(p, "name"), "'" + name + "' is not a DNS-1123 label");
      if (name == kTrainerContainer && std::string(list) == "containers") {
        ParseTrainerOverlay(c, p, s, &trainer_mounts);
        continue;
      }
      if (!names.insert(name).second) {
        Fail(Join(p, "name"), "duplicate container name '" + name + "'" +
                                  (name == kTrainerContainer ? " (the operator's trainer container)" : ""));
      }
      ParseOtherContainer(c, p, *s, std::string(list) == "containers");
      others.emplace_back(p, &c);
      (std::string(list) == "containers" ? s->pod_template.sidecars : s->pod_template.init_containers).push_back(c);
    }
  }
  for (const json& m : trainer_mounts) {
    ParseVolumeMount(m["mount"], m["path"].get<std::string>(), volumes);
    s->volume_mounts.push_back(m["mount"]);
  }
  for (const auto& [p, c] : others) {
    const json* mounts = Find(*c, "volumeMounts");
    if (!mounts) continue;
    if (!mounts->is_array()) Fail(Join(p, "volumeMounts"), "must be a list");
    for (size_t i = 0; i < mounts->size(); ++i) {
      const std::string mp = Index(Join(p, "volumeMounts"), i);
      const json& m = RequireObject((*mounts)[i], mp);
      const std::string name = OptString(m, "name", mp).value_or("");
      if (!volumes.count(name) && !kReservedVolumes.count(name)) {
        Fail(Join(mp, "name"), "'" + name + "' names no volume of the pod");
      }
      const std::string mount_path = OptString(m, "mountPath", mp, 1024).value_or("");
      if (mount_path.empty() || mount_path[0] != '/') Fail(Join(mp, "mountPath"), "must be an absolute path");
    }
  }
}

// Pod-level fields checked here; the rest passes through to the API server.
void ParseTemplatePodFields(const json& spec, const std::string& sp) {
  if (const json* secrets = Find(spec, "imagePullSecrets")) {
    if (!secrets->is_array()) Fail(Join(sp, "imagePullSecrets"), "must be a list");
    for (size_t i = 0; i < secrets->size(); ++i) {
      const std::string p = Index(Join(sp, "imagePullSecrets"), i);
      if (OptString(RequireObject((*secrets)[i], p), "name", p, 253).value_or("").empty()) Fail(Join(p, "name"), "required");
    }
  }
  if (const json* tsc = Find(spec, "topologySpreadConstraints")) {
    if (!tsc->is_array()) Fail(Join(sp, "topologySpreadConstraints"), "must be a list");
    for (size_t i = 0; i < tsc->size(); ++i) {
      const std::string p = Index(Join(sp, "topologySpreadConstraints"), i);
      const json& c = RequireObject((*tsc)[i], p);
      if (!OptInt(c, "maxSkew", p, 1, INT32_MAX)) Fail(Join(p, "maxSkew"), "required (at least 1)");
      if (OptString(c, "topologyKey", p, 317).value_or("").empty()) Fail(Join(p, "topologyKey"), "required");
      OneOf(OptString(c, "whenUnsatisfiable", p).value_or(""), {"DoNotSchedule", "ScheduleAnyway"},
            Join(p, "whenUnsatisfiable"));
    }
  }
  if (auto rc = OptString(spec, "runtimeClassName", sp, 253); rc && !IsDns1123Label(*rc)) {
    Fail(Join(sp, "runtimeClassName"), "'" + *rc + "' is not a valid RuntimeClass name");
  }
  if (const json* sc = Find(spec, "securityContext")) RequireObject(*sc, Join(sp, "securityContext"));
}

}  // namespace

void ParsePodTemplate(const json* v, const std::string& path, TrainingJobSpec* s) {
  if (!v) return;
  RequireObject(*v, path);
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.key() != "metadata" && it.key() != "spec") Fail(Join(path, it.key()), "unknown field (metadata, spec)");
  }
  if (const json* meta = Find(*v, "metadata")) ParseTemplateMetadata(*meta, Join(path, "metadata"), s);
  const json* spec = Find(*v, "spec");
  if (!spec) return;
  const std::string sp = Join(path, "spec");
  RequireObject(*spec, sp);
  for (const auto& [field, why] : OwnedPodFields()) {
    if (Find(*spec, field.c_str())) Fail(Join(sp, field), why);
  }
  std::set<std::string> volume_names;
  for (const json& vol : s->volumes) volume_names.insert(vol.value("name", ""));
  if (const json* vols = Find(*spec, "volumes")) {
    if (!vols->is_array()) Fail(Join(sp, "volumes"), "must be a list");
    for (size_t i = 0; i < vols->size(); ++i) {
      const std::string p = Index(Join(sp, "volumes"), i);
      const std::string name = ParseVolume((*vols)[i], p);
      if (!volume_names.insert(name).second) Fail(Join(p, "name"), "duplicate volume '" + name + "' (spec.volumes has it)");
      s->volumes.push_back((*vols)[i]);
    }
  }
  ParseTemplateContainers(*spec, sp, volume_names, s);
  ParseTemplatePodFields(*spec, sp);
  json rest = *spec;
  for (const char* taken : {"volumes", "containers", "initContainers"}) rest.erase(taken);
  s->pod_template.spec = rest;
}

}  // namespace hypertrain::api::parse
