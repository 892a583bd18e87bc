// spec.scheduling: placement (node selector, tolerations, affinity), gang
// admission and topology, validated field by field.
#include <regex>
#include <set>

#include "operator/api/parse_util.h"
#include "operator/api/spec_parts.h"

namespace hypertrain::api {

const char* GangProviderName(GangProvider p) {
  switch (p) {
    case GangProvider::kKueue: return "kueue";
    case GangProvider::kCoscheduling: return "coscheduling";
    case GangProvider::kVolcano: return "volcano";
    case GangProvider::kNone: break;
  }
  return "none";
}

namespace parse {
namespace {

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

// Rejects keys of `obj` not in `known` (a typo is an error, not a no-op).
void OnlyKeys(const json& obj, const std::string& path, const std::set<std::string>& known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!known.count(it.key())) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      Fail(Join(path, it.key()), "unknown field (expected one of " + list + ")");
    }
  }
}

const json& RequireList(const json& obj, const char* key, const std::string& path, bool non_empty) {
  static const json kEmpty = json::array();
  const json* v = Find(obj, key);
  if (!v) {
    if (non_empty) Fail(Join(path, key), "required");
    return kEmpty;
  }
  if (!v->is_array()) Fail(Join(path, key), "must be a list");
  if (non_empty && v->empty()) Fail(Join(path, key), "must not be empty");
  return *v;
}

void ValidateLabelKey(const std::string& key, const std::string& path) {
  if (key.empty()) Fail(path, "required");
  if (std::string why = LabelKeyProblem(key); !why.empty()) Fail(path, "'" + key + "' is not a valid label key: " + why);
}

// A selector requirement (node or pod): key, operator, values.
void ValidateRequirement(const json& r, const std::string& path, bool node) {
  RequireObject(r, path);
  OnlyKeys(r, path, {"key", "operator", "values"});
  const std::string key = OptString(r, "key", path, 317).value_or("");
  if (key.empty()) Fail(Join(path, "key"), "required");
  ValidateLabelKey(key, Join(path, "key"));
  std::vector<std::string> ops = {"In", "NotIn", "Exists", "DoesNotExist"};
  if (node) ops.insert(ops.end(), {"Gt", "Lt"});
  const std::string op = OneOf(OptString(r, "operator", path).value_or(""), ops, Join(path, "operator"));
  const std::vector<std::string> values = StringList(r, "values", path, 1024);
  if ((op == "In" || op == "NotIn") && values.empty()) Fail(Join(path, "values"), "required for operator " + op);
  if ((op == "Exists" || op == "DoesNotExist") && !values.empty()) {
    Fail(Join(path, "values"), "must be empty for operator " + op);
  }
  if (op == "Gt" || op == "Lt") {
    static const std::regex kInt("^-?[0-9]+$");
    if (values.size() != 1 || !std::regex_match(values[0], kInt)) {
      Fail(Join(path, "values"), "operator " + op + " takes exactly one integer");
    }
  }
}

void ValidateNodeSelectorTerm(const json& t, const std::string& path) {
  RequireObject(t, path);
  OnlyKeys(t, path, {"matchExpressions", "matchFields"});
  const json& exprs = RequireList(t, "matchExpressions", path, false);
  for (size_t i = 0; i < exprs.size(); ++i) ValidateRequirement(exprs[i], Index(Join(path, "matchExpressions"), i), true);
  const json& fields = RequireList(t, "matchFields", path, false);
  for (size_t i = 0; i < fields.size(); ++i) ValidateRequirement(fields[i], Index(Join(path, "matchFields"), i), true);
}

void ValidateLabelSelector(const json& s, const std::string& path) {
  RequireObject(s, path);
  OnlyKeys(s, path, {"matchLabels", "matchExpressions"});
  ValidateLabels(StringMap(s, "matchLabels", path), Join(path, "matchLabels"));
  const json& exprs = RequireList(s, "matchExpressions", path, false);
  for (size_t i = 0; i < exprs.size(); ++i) ValidateRequirement(exprs[i], Index(Join(path, "matchExpressions"), i), false);
}

void ValidatePodAffinityTerm(const json& t, const std::string& path) {
  RequireObject(t, path);
  OnlyKeys(t, path, {"labelSelector", "namespaceSelector", "namespaces", "topologyKey", "matchLabelKeys",
                     "mismatchLabelKeys"});
  ValidateLabelKey(OptString(t, "topologyKey", path, 317).value_or(""), Join(path, "topologyKey"));
  if (const json* s = Find(t, "labelSelector")) ValidateLabelSelector(*s, Join(path, "labelSelector"));
  if (const json* s = Find(t, "namespaceSelector")) ValidateLabelSelector(*s, Join(path, "namespaceSelector"));
  StringList(t, "namespaces", path, 64);
}

void Weight(const json& w, const std::string& path) {
  if (!OptInt(w, "weight", path, 1, 100)) Fail(Join(path, "weight"), "required (1-100)");
}

// core/v1 Affinity, checked as the API server checks it: garbage fails here,
// naming the field, not pod by pod at creation.
void ValidateAffinity(const json& a, const std::string& path) {
  RequireObject(a, path);
  OnlyKeys(a, path, {"nodeAffinity", "podAffinity", "podAntiAffinity"});
  if (const json* na = Find(a, "nodeAffinity")) {
    const std::string p = Join(path, "nodeAffinity");
    RequireObject(*na, p);
    OnlyKeys(*na, p, {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"});
    if (const json* req = Find(*na, "requiredDuringSchedulingIgnoredDuringExecution")) {
      const std::string rp = Join(p, "requiredDuringSchedulingIgnoredDuringExecution");
      RequireObject(*req, rp);
      OnlyKeys(*req, rp, {"nodeSelectorTerms"});
      const json& terms = RequireList(*req, "nodeSelectorTerms", rp, true);
      for (size_t i = 0; i < terms.size(); ++i) ValidateNodeSelectorTerm(terms[i], Index(Join(rp, "nodeSelectorTerms"), i));
    }
    const json& pref = RequireList(*na, "preferredDuringSchedulingIgnoredDuringExecution", p, false);
    for (size_t i = 0; i < pref.size(); ++i) {
      const std::string ip = Index(Join(p, "preferredDuringSchedulingIgnoredDuringExecution"), i);
      RequireObject(pref[i], ip);
      OnlyKeys(pref[i], ip, {"weight", "preference"});
      Weight(pref[i], ip);
      const json* term = Find(pref[i], "preference");
      if (!term) Fail(Join(ip, "preference"), "required");
      ValidateNodeSelectorTerm(*term, Join(ip, "preference"));
    }
  }
  for (const char* kind : {"podAffinity", "podAntiAffinity"}) {
    const json* pa = Find(a, kind);
    if (!pa) continue;
    const std::string p = Join(path, kind);
    RequireObject(*pa, p);
    OnlyKeys(*pa, p, {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"});
    const json& req = RequireList(*pa, "requiredDuringSchedulingIgnoredDuringExecution", p, false);
    for (size_t i = 0; i < req.size(); ++i) {
      ValidatePodAffinityTerm(req[i], Index(Join(p, "requiredDuringSchedulingIgnoredDuringExecution"), i));
    }
    const json& pref = RequireList(*pa, "preferredDuringSchedulingIgnoredDuringExecution", p, false);
    for (size_t i = 0; i < pref.size(); ++i) {
      const std::string ip = Index(Join(p, "preferredDuringSchedulingIgnoredDuringExecution"), i);
      RequireObject(pref[i], ip);
      OnlyKeys(pref[i], ip, {"weight", "podAffinityTerm"});
      Weight(pref[i], ip);
      const json* term = Find(pref[i], "podAffinityTerm");
      if (!term) Fail(Join(ip, "podAffinityTerm"), "required");
      ValidatePodAffinityTerm(*term, Join(ip, "podAffinityTerm"));
    }
  }
}

GangScheduling ParseGang(const json* v, const std::string& path) {
  GangScheduling g;
  if (!v) return g;
  RequireObject(*v, path);
  OnlyKeys(*v, path, {"provider", "queueName", "priorityClass"});
  const std::string provider =
      OneOf(OptString(*v, "provider", path).value_or(""), {"kueue", "coscheduling", "volcano"}, Join(path, "provider"));
  g.provider = provider == "kueue"          ? GangProvider::kKueue
               : provider == "coscheduling" ? GangProvider::kCoscheduling
                                            : GangProvider::kVolcano;
  g.queue_name = OptString(*v, "queueName", path, 253).value_or("");
  g.priority_class = OptString(*v, "priorityClass", path, 253).value_or("");
  if (g.provider == GangProvider::kKueue && g.queue_name.empty()) {
    Fail(Join(path, "queueName"), "required for provider kueue: the LocalQueue the gang waits in (label "
                                  "kueue.x-k8s.io/queue-name)");
  }
  if (g.provider == GangProvider::kCoscheduling && !g.queue_name.empty()) {
    Fail(Join(path, "queueName"), "provider coscheduling has no queues (kueue and volcano do)");
  }
  if (g.provider != GangProvider::kKueue && !g.priority_class.empty()) {
    Fail(Join(path, "priorityClass"), "is a Kueue WorkloadPriorityClass; use spec.scheduling.priorityClassName for "
                                      "provider " + provider);
  }
  for (const auto& [field, value] : {std::pair{"queueName", g.queue_name}, std::pair{"priorityClass", g.priority_class}}) {
    if (!value.empty() && !IsDns1123Label(value)) {
      Fail(Join(path, field), "'" + value + "' must be a DNS-1123 label (it becomes a label value)");
    }
  }
  return g;
}

Topology ParseTopology(const json* v, const std::string& path) {
  Topology t;
  if (!v) return t;
  RequireObject(*v, path);
  OnlyKeys(*v, path, {"layer", "topologyKey", "mode"});
  const auto layer = OptInt(*v, "layer", path, 1, 3);
  const auto key = OptString(*v, "topologyKey", path, 317);
  if (layer.has_value() == key.has_value()) {
    Fail(path, "exactly one of layer (HyperPod's topology.k8s.aws/network-node-layer-1|2|3) or topologyKey");
  }
  if (key) {
    ValidateLabelKey(*key, Join(path, "topologyKey"));
    t.key = *key;
  } else {
    t.key = kNetworkNodeLayerLabelPrefix + std::to_string(*layer);
  }
  t.required = OneOf(OptString(*v, "mode", path).value_or("Required"), {"Required", "Preferred"}, Join(path, "mode")) ==
               "Required";
  return t;
}

}  // namespace

Scheduling ParseScheduling(const json* v, const std::string& path, const FaultPolicy& fp) {
  Scheduling s;
  if (!v) return s;
  RequireObject(*v, path);
  s.scheduler_name = OptString(*v, "schedulerName", path, 253).value_or("");
  s.priority_class_name = OptString(*v, "priorityClassName", path, 253).value_or("");
  // The pod's rules: a scheduler or priority class the API server would refuse
  // pod by pod is refused once, here.
  for (const auto& [key, value] : {std::pair{"schedulerName", &s.scheduler_name},
                                   std::pair{"priorityClassName", &s.priority_class_name}}) {
    if (!value->empty() && !IsDns1123Subdomain(*value)) {
      Fail(Join(path, key), "'" + *value + "' is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')");
    }
  }
  s.node_selector = StringMap(*v, "nodeSelector", path);
  ValidateLabels(s.node_selector, Join(path, "nodeSelector"));
  if (const json* t = Find(*v, "tolerations")) {
    ValidateTolerations(*t, Join(path, "tolerations"), fp);
    s.tolerations = *t;
  }
  if (const json* a = Find(*v, "affinity")) {
    ValidateAffinity(*a, Join(path, "affinity"));
    s.affinity = *a;
  }
  s.termination_grace_period_seconds =
      OptInt(*v, "terminationGracePeriodSeconds", path, 0, 3600).value_or(s.termination_grace_period_seconds);
  s.gang = ParseGang(Find(*v, "gang"), Join(path, "gang"));
  s.topology = ParseTopology(Find(*v, "topology"), Join(path, "topology"));
  return s;
}

void CheckScheduling(const TrainingJobSpec& s) {
  const Scheduling& sc = s.scheduling;
  if (!s.instance_type.empty()) {
    auto sel = sc.node_selector.find(kInstanceTypeLabel);
    if (sel != sc.node_selector.end() && sel->second != s.instance_type) {
      Fail(std::string("spec.scheduling.nodeSelector.") + kInstanceTypeLabel,
           "'" + sel->second + "' contradicts spec.instanceType '" + s.instance_type + "'");
    }
  }
  // Volcano's PodGroup is honoured by the volcano scheduler only; Kueue gates
  // pods for whichever scheduler binds them.
  if (sc.gang.provider == GangProvider::kVolcano && !sc.scheduler_name.empty() && sc.scheduler_name != "volcano") {
    Fail("spec.scheduling.schedulerName", "'" + sc.scheduler_name +
                                              "' does not read Volcano PodGroups; leave it empty (volcano) with "
                                              "gang provider volcano");
  }
}

}  // namespace parse
}  // namespace hypertrain::api
