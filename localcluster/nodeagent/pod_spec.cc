#include "localcluster/nodeagent/pod_spec.h"

#include <cmath>
#include <cstdlib>
#include <set>

namespace hypertrain::nodeagent {
namespace {

std::string Str(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

const Json& Field(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object() || !j.contains(key)) return kNull;
  return j[key];
}

std::string Label(const Json& node, const std::string& key, bool* present) {
  const Json& labels = Field(Field(node, "metadata"), "labels");
  *present = labels.is_object() && labels.contains(key) && labels[key].is_string();
  return *present ? labels[key].get<std::string>() : "";
}

bool ExpressionMatches(const Json& e, const Json& node) {
  const std::string key = Str(e, "key");
  const std::string op = Str(e, "operator");
  bool present = false;
  const std::string v = Label(node, key, &present);
  std::set<std::string> values;
  if (Field(e, "values").is_array()) {
    for (const Json& x : e["values"]) {
      if (x.is_string()) values.insert(x.get<std::string>());
    }
  }
  if (op == "In") return present && values.count(v);
  if (op == "NotIn") return !present || !values.count(v);
  if (op == "Exists") return present;
  if (op == "DoesNotExist") return !present;
  if (op == "Gt" || op == "Lt") {
    if (!present || values.size() != 1) return false;
    const double a = std::atof(v.c_str()), b = std::atof(values.begin()->c_str());
    return op == "Gt" ? a > b : a < b;
  }
  return false;  // unknown operator: never matches
}

}  // namespace

std::optional<double> ParseQuantity(const std::string& q) {
  if (q.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(q.c_str(), &end);
  if (end == q.c_str() || !std::isfinite(v)) return std::nullopt;
  const std::string suffix(end);
  static const std::map<std::string, double> kMul = {
      {"", 1},      {"m", 1e-3},  {"k", 1e3},   {"M", 1e6},   {"G", 1e9},
      {"T", 1e12},  {"P", 1e15},  {"Ki", 1024}, {"Mi", 1048576.0}, {"Gi", 1073741824.0},
      {"Ti", 1099511627776.0},    {"Pi", 1125899906842624.0}};
  auto it = kMul.find(suffix);
  if (it == kMul.end()) return std::nullopt;
  return v * it->second;
}

std::map<std::string, double> PodRequests(const Json& pod) {
  std::map<std::string, double> out;
  const Json& containers = Field(Field(pod, "spec"), "containers");
  if (containers.is_array()) {
    for (const Json& c : containers) {
      const Json& res = Field(c, "resources");
      std::map<std::string, double> mine;
      for (const char* kind : {"limits", "requests"}) {  // requests override limits
        const Json& m = Field(res, kind);
        if (!m.is_object()) continue;
        for (auto it = m.begin(); it != m.end(); ++it) {
          std::string s = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
          if (auto q = ParseQuantity(s)) mine[it.key()] = *q;
        }
      }
      for (const auto& [k, v] : mine) out[k] += v;
    }
  }
  out["pods"] += 1;
  return out;
}

bool MatchesNode(const Json& pod, const Json& node, std::string* why) {
  const Json& spec = Field(pod, "spec");
  const Json& sel = Field(spec, "nodeSelector");
  if (sel.is_object()) {
    for (auto it = sel.begin(); it != sel.end(); ++it) {
      bool present = false;
      const std::string v = Label(node, it.key(), &present);
      if (!present || !it.value().is_string() || v != it.value().get<std::string>()) {
        *why = "nodeSelector " + it.key() + "=" + (it.value().is_string() ? it.value().get<std::string>() : "?");
        return false;
      }
    }
  }
  const Json& terms = Field(Field(Field(Field(spec, "affinity"), "nodeAffinity"),
                                  "requiredDuringSchedulingIgnoredDuringExecution"),
                            "nodeSelectorTerms");
  if (!terms.is_array() || terms.empty()) return true;
  for (const Json& term : terms) {  // terms are ORed, expressions ANDed
    bool all = true;
    const Json& exprs = Field(term, "matchExpressions");
    if (exprs.is_array()) {
      for (const Json& e : exprs) all = all && ExpressionMatches(e, node);
    }
    if (all) return true;
  }
  *why = "required node affinity";
  return false;
}

bool SelectorMatches(const Json& selector, const Json& labels) {
  if (!selector.is_object() || selector.empty()) return false;
  auto label = [&](const std::string& k, bool* present) {
    *present = labels.is_object() && labels.contains(k) && labels[k].is_string();
    return *present ? labels[k].get<std::string>() : std::string();
  };
  const Json& match = Field(selector, "matchLabels");
  if (match.is_object()) {
    for (auto it = match.begin(); it != match.end(); ++it) {
      bool present = false;
      if (label(it.key(), &present) != it.value().get<std::string>() || !present) return false;
    }
  }
  const Json& exprs = Field(selector, "matchExpressions");
  if (exprs.is_array()) {
    Json fake_node = {{"metadata", {{"labels", labels.is_object() ? labels : Json::object()}}}};
    for (const Json& e : exprs) {
      if (!ExpressionMatches(e, fake_node)) return false;
    }
  }
  return true;
}

namespace {

std::string LabelOf(const Json& node, const std::string& key) {
  bool present = false;
  return Label(node, key, &present);
}

// The placed pods a pod affinity term selects.
std::vector<const PlacedPod*> Selected(const Json& term, const std::string& pod_ns, const std::vector<PlacedPod>& placed) {
  std::set<std::string> namespaces;
  if (Field(term, "namespaces").is_array()) {
    for (const Json& n : term["namespaces"]) namespaces.insert(n.get<std::string>());
  }
  if (namespaces.empty()) namespaces.insert(pod_ns);
  std::vector<const PlacedPod*> out;
  for (const PlacedPod& p : placed) {
    if (namespaces.count(p.ns) && SelectorMatches(Field(term, "labelSelector"), p.labels)) out.push_back(&p);
  }
  return out;
}

}  // namespace

bool MatchesPodAffinity(const Json& pod, const Json& node, const std::vector<PlacedPod>& placed,
                        const std::map<std::string, Json>& nodes, std::string* why) {
  const Json& affinity = Field(Field(pod, "spec"), "affinity");
  const std::string ns = Str(Field(pod, "metadata"), "namespace");
  const Json& own_labels = Field(Field(pod, "metadata"), "labels");
  auto same_domain = [&](const PlacedPod& p, const std::string& key) {
    auto other = nodes.find(p.node);
    const std::string mine = LabelOf(node, key);
    return other != nodes.end() && !mine.empty() && LabelOf(other->second, key) == mine;
  };
  const Json& required = Field(Field(affinity, "podAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
  for (const Json& term : required.is_array() ? required : Json::array()) {
    const std::string key = Str(term, "topologyKey");
    const auto selected = Selected(term, ns, placed);
    if (selected.empty() && SelectorMatches(Field(term, "labelSelector"), own_labels)) continue;
    bool ok = false;
    for (const PlacedPod* p : selected) ok = ok || same_domain(*p, key);
    if (!ok) {
      *why = "pod affinity (" + key + ")";
      return false;
    }
  }
  const Json& anti = Field(Field(affinity, "podAntiAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
  for (const Json& term : anti.is_array() ? anti : Json::array()) {
    const std::string key = Str(term, "topologyKey");
    for (const PlacedPod* p : Selected(term, ns, placed)) {
      if (same_domain(*p, key)) {
        *why = "pod anti-affinity (" + key + ")";
        return false;
      }
    }
  }
  return true;
}

bool ToleratesTaints(const Json& pod, const Json& node, std::string* why) {
  const Json& taints = Field(Field(node, "spec"), "taints");
  if (!taints.is_array()) return true;
  const Json& tols = Field(Field(pod, "spec"), "tolerations");
  for (const Json& t : taints) {
    const std::string effect = Str(t, "effect");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    bool ok = false;
    if (tols.is_array()) {
      for (const Json& tol : tols) {
        const std::string te = Str(tol, "effect");
        if (!te.empty() && te != effect) continue;
        const std::string op = Str(tol, "operator").empty() ? "Equal" : Str(tol, "operator");
        const std::string key = Str(tol, "key");
        if (op == "Exists" && (key.empty() || key == Str(t, "key"))) ok = true;
        if (op == "Equal" && key == Str(t, "key") && Str(tol, "value") == Str(t, "value")) ok = true;
      }
    }
    if (!ok) {
      *why = "untolerated taint " + Str(t, "key") + ":" + effect;
      return false;
    }
  }
  return true;
}

bool Fits(const std::map<std::string, double>& requests, const std::map<std::string, double>& used,
          const Json& node, std::string* why) {
  const Json& alloc = Field(Field(node, "status"), "allocatable");
  for (const auto& [k, v] : requests) {
    if (v <= 0) continue;
    double have = 0;
    if (alloc.is_object() && alloc.contains(k) && alloc[k].is_string()) have = ParseQuantity(alloc[k]).value_or(0);
    auto u = used.find(k);
    const double in_use = u == used.end() ? 0 : u->second;
    if (in_use + v > have + 1e-9) {
      *why = "insufficient " + k;
      return false;
    }
  }
  return true;
}

std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '(') {
      const size_t close = s.find(')', i + 2);
      if (close == std::string::npos) {
        out += s.substr(i);
        break;
      }
      const std::string name = s.substr(i + 2, close - i - 2);
      auto it = vars.find(name);
      out += it == vars.end() ? s.substr(i, close - i + 1) : it->second;
      i = close;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool IsClusterDnsName(const std::string& s) {
  auto ends = [&](const std::string& suf) {
    return s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (s.find_first_of(" /:=") != std::string::npos) return false;
  return ends(".svc") || ends(".svc.cluster.local");
}

namespace {

using ConfigMaps = std::map<std::string, Json>;
// A volume's mountPath and the local directory that stands for it.
using PathRewrites = std::vector<std::pair<std::string, std::string>>;

// One mounted volume: hostPath (used in place), configMap (files to write) or
// anything else (an empty per-pod directory).
bool BuildVolume(const Json& src, const std::string& name, const std::string& mount_path,
                 const ConfigMaps& config_maps, const ProcessOptions& opts, ProcessSpec::Volume* vol,
                 std::string* error) {
  vol->mount_path = mount_path;
  vol->local_dir = opts.pod_dir + "/volumes/" + name;
  if (src.contains("hostPath")) {
    vol->host_path = Str(src["hostPath"], "path");
    vol->local_dir = vol->host_path;
    return true;
  }
  if (!src.contains("configMap")) return true;
  vol->config_map = Str(src["configMap"], "name");
  auto cm = config_maps.find(vol->config_map);
  if (cm == config_maps.end()) {
    *error = "ConfigMap " + vol->config_map + " not found";
    return false;
  }
  const Json& data = Field(cm->second, "data");
  const Json& items = Field(src["configMap"], "items");
  if (items.is_array() && !items.empty()) {
    for (const Json& it : items) {
      const std::string key = Str(it, "key");
      if (!data.is_object() || !data.contains(key)) {
        *error = "ConfigMap " + vol->config_map + " has no key " + key;
        return false;
      }
      vol->files[Str(it, "path").empty() ? key : Str(it, "path")] = data[key].get<std::string>();
    }
  } else if (data.is_object()) {
    for (auto it = data.begin(); it != data.end(); ++it) {
      if (it.value().is_string()) vol->files[it.key()] = it.value().get<std::string>();
    }
  }
  return true;
}

bool BuildVolumes(const Json& spec, const Json& c, const ConfigMaps& config_maps, const ProcessOptions& opts,
                  ProcessSpec* out, PathRewrites* rewrites, std::string* error) {
  std::map<std::string, Json> vols;
  if (Field(spec, "volumes").is_array()) {
    for (const Json& v : spec["volumes"]) vols[Str(v, "name")] = v;
  }
  if (!Field(c, "volumeMounts").is_array()) return true;
  for (const Json& m : c["volumeMounts"]) {
    const std::string name = Str(m, "name");
    const std::string mp = Str(m, "mountPath");
    auto v = vols.find(name);
    if (v == vols.end()) {
      *error = "volumeMount " + name + " names no volume";
      return false;
    }
    ProcessSpec::Volume vol;
    if (!BuildVolume(v->second, name, mp, config_maps, opts, &vol, error)) return false;
    if (mp != "/dev/shm") rewrites->emplace_back(mp, vol.local_dir);
    out->volumes.push_back(std::move(vol));
  }
  return true;
}

std::string RewritePath(const PathRewrites& rewrites, const std::string& s) {
  for (const auto& [mp, dir] : rewrites) {
    if (s == mp) return dir;
    if (s.size() > mp.size() && s.compare(0, mp.size(), mp) == 0 && s[mp.size()] == '/') {
      return dir + s.substr(mp.size());
    }
  }
  return s;
}

// The value of a fieldRef (downward API) this agent supports.
bool FieldRefValue(const Json& pod, const std::string& path, const ProcessOptions& opts, std::string* value) {
  const Json& meta = Field(pod, "metadata");
  const Json& spec = Field(pod, "spec");
  auto entry = [&](const char* what, const std::string& key) -> std::string {
    const Json& m = Field(meta, what);
    return m.is_object() && m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
  };
  if (path == "metadata.name") *value = Str(meta, "name");
  else if (path == "metadata.namespace") *value = Str(meta, "namespace");
  else if (path == "metadata.uid") *value = Str(meta, "uid");
  else if (path == "spec.nodeName") *value = Str(spec, "nodeName");
  else if (path == "spec.serviceAccountName") *value = Str(spec, "serviceAccountName");
  else if (path == "status.podIP" || path == "status.hostIP") *value = opts.loopback;
  else if (path.rfind("metadata.labels['", 0) == 0 && path.size() > 19)
    *value = entry("labels", path.substr(17, path.size() - 19));
  else if (path.rfind("metadata.annotations['", 0) == 0 && path.size() > 24)
    *value = entry("annotations", path.substr(22, path.size() - 24));
  else
    return false;
  return true;
}

// An env entry's valueFrom: fieldRef or configMapKeyRef.
bool ValueFrom(const Json& pod, const Json& from, const std::string& name, const ConfigMaps& config_maps,
               const ProcessOptions& opts, std::string* value, std::string* error) {
  if (from.contains("fieldRef")) {
    const std::string path = Str(from["fieldRef"], "fieldPath");
    if (FieldRefValue(pod, path, opts, value)) return true;
    *error = "env " + name + ": unsupported fieldRef " + path;
    return false;
  }
  if (from.contains("configMapKeyRef")) {
    const std::string cm = Str(from["configMapKeyRef"], "name");
    const std::string key = Str(from["configMapKeyRef"], "key");
    auto it = config_maps.find(cm);
    const Json& data = it == config_maps.end() ? Json() : Field(it->second, "data");
    if (!data.is_object() || !data.contains(key)) {
      *error = "env " + name + ": ConfigMap " + cm + " key " + key + " not found";
      return false;
    }
    *value = data[key].get<std::string>();
    return true;
  }
  *error = "env " + name + ": unsupported valueFrom (fieldRef and configMapKeyRef are)";
  return false;
}

// The environment in order: the agent's passthrough, the container's env
// (cluster DNS names become the loopback address, mount paths local
// directories), then the agent's extra variables. `vars` gets every value.
bool BuildEnv(const Json& pod, const Json& c, const ConfigMaps& config_maps, const ProcessOptions& opts,
              const PathRewrites& rewrites, std::map<std::string, std::string>* vars, ProcessSpec* out,
              std::string* error) {
  std::vector<std::string> order;
  auto set = [&](const std::string& k, const std::string& v) {
    if (!vars->count(k)) order.push_back(k);
    (*vars)[k] = v;
  };
  for (const std::string& kv : opts.passthrough_env) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (Field(c, "env").is_array()) {
    for (const Json& e : c["env"]) {
      const std::string name = Str(e, "name");
      std::string value;
      if (e.contains("value")) {
        value = ExpandVars(Str(e, "value"), *vars);
      } else if (Field(e, "valueFrom").is_object()) {
        if (!ValueFrom(pod, e["valueFrom"], name, config_maps, opts, &value, error)) return false;
      }
      if (IsClusterDnsName(value)) value = opts.loopback;
      set(name, RewritePath(rewrites, value));
    }
  }
  for (const auto& [k, v] : opts.extra_env) set(k, v);
  for (const std::string& k : order) out->env.push_back(k + "=" + (*vars)[k]);
  return true;
}

}  // namespace

bool BuildProcess(const Json& pod, const std::map<std::string, Json>& config_maps, const ProcessOptions& opts,
                  ProcessSpec* out, std::string* error) {
  const Json& spec = Field(pod, "spec");
  const Json& containers = Field(spec, "containers");
  if (!containers.is_array() || containers.empty()) {
    *error = "pod has no containers";
    return false;
  }
  const Json& c = containers[0];
  const std::string image = Str(c, "image");
  auto img = opts.image_map.find(image);
  if (img == opts.image_map.end()) {
    *error = "image \"" + image + "\" has no local binary (--image-map " + image + "=PATH)";
    return false;
  }
  PathRewrites rewrites;
  if (!BuildVolumes(spec, c, config_maps, opts, out, &rewrites, error)) return false;
  std::map<std::string, std::string> vars;
  if (!BuildEnv(pod, c, config_maps, opts, rewrites, &vars, out, error)) return false;

  // The image's binary stands for the entrypoint (command[0], or the image's
  // own entrypoint when the pod gives no command).
  std::vector<std::string> argv = {img->second};
  const Json& command = Field(c, "command");
  if (command.is_array()) {
    for (size_t i = 1; i < command.size(); ++i) argv.push_back(command[i].get<std::string>());
  }
  if (Field(c, "args").is_array()) {
    for (const Json& a : c["args"]) argv.push_back(a.get<std::string>());
  }
  for (size_t i = 1; i < argv.size(); ++i) argv[i] = RewritePath(rewrites, ExpandVars(argv[i], vars));
  out->argv = std::move(argv);
  return true;
}

}  // namespace hypertrain::nodeagent
