// Checks `helm template` output of charts/hypertrain-operator: security
// context, probes, args, RBAC that grants exactly what the operator's code
// calls (operator/cmd/permissions.cc) per watched namespace, the watched
// Namespaces, metrics Service and the CRD. Used by helm_chart_test.sh with the real Helm binary.
//
// Usage: chart_check RENDERED.yaml --release-namespace=NS [--watch=a,b]
//        [--replicas=N] [--log-level=L] [--crd=SOURCE_CRD.yaml]
//        [--gang=coscheduling,volcano]   (gangScheduling values that are on)
//        [--crd-install=false] [--crd-keep=false]
// Prints every problem and exits 1 when there is any.
//        chart_check --json RENDERED.yaml   prints the objects as one JSON array
//        (for the test's own assertions on values, with python3's json).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "operator/api/yaml_json.h"
#include "operator/cmd/permissions.h"

namespace {

using nlohmann::json;
using Triple = std::tuple<std::string, std::string, std::string>;  // group, resource, verb

std::vector<std::string> g_problems;
void Expect(bool ok, const std::string& what) {
  if (!ok) g_problems.push_back(what);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "chart_check: cannot open " << path << "\n";
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string Str(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

std::set<Triple> Rules(const json& role) {
  std::set<Triple> out;
  for (const json& r : role.value("rules", json::array())) {
    for (const json& g : r["apiGroups"]) {
      for (const json& res : r["resources"]) {
        for (const json& v : r["verbs"]) out.insert({Str(g), Str(res), Str(v)});
      }
    }
  }
  return out;
}

std::set<Triple> Expand(const std::string& group, const std::vector<std::string>& resources,
                        const std::vector<std::string>& verbs) {
  std::set<Triple> out;
  for (const auto& r : resources) {
    for (const auto& v : verbs) out.insert({group, r, v});
  }
  return out;
}

std::string Show(const std::set<Triple>& s) {
  std::string out;
  for (const auto& [g, r, v] : s) out += " " + (g.empty() ? "core" : g) + "/" + r + ":" + v;
  return out;
}

bool HasArg(const json& args, const std::string& arg) {
  for (const json& a : args) {
    if (a == arg) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: chart_check RENDERED.yaml --release-namespace=NS [--watch=a,b] [--replicas=N] "
                 "[--log-level=L] [--crd=FILE]\n";
    return 2;
  }
  if (std::string(argv[1]) == "--json" && argc == 3) {
    auto docs = hypertrain::api::YamlDocumentsToJson(ReadFile(argv[2]));
    if (!docs.ok()) {
      std::cerr << "chart_check: rendered output is not YAML: " << docs.status().ToString() << "\n";
      return 1;
    }
    json all = json::array();
    for (const json& d : *docs) {
      if (!d.is_null()) all.push_back(d);
    }
    std::cout << all.dump() << "\n";
    return 0;
  }
  std::map<std::string, std::string> opt;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) {
      std::cerr << "chart_check: bad argument " << a << "\n";
      return 2;
    }
    opt[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  const std::string release_ns = opt["release-namespace"];
  const std::vector<std::string> watch = Split(opt["watch"]);
  const std::string replicas = opt.count("replicas") ? opt["replicas"] : "2";
  const std::string log_level = opt.count("log-level") ? opt["log-level"] : "info";
  const std::vector<std::string> gang = Split(opt["gang"]);

  auto docs = hypertrain::api::YamlDocumentsToJson(ReadFile(argv[1]));
  if (!docs.ok()) {
    std::cerr << "chart_check: rendered output is not YAML: " << docs.status().ToString() << "\n";
    return 1;
  }
  std::map<std::string, std::vector<json>> by_kind;
  for (const json& d : *docs) by_kind[d.value("kind", "")].push_back(d);

  // Deployment.
  Expect(by_kind["Deployment"].size() == 1, "exactly one Deployment");
  std::string sa_name;
  json pod_labels;
  if (by_kind["Deployment"].size() == 1) {
    const json& dep = by_kind["Deployment"][0];
    Expect(dep["metadata"]["namespace"] == release_ns, "Deployment in the release namespace");
    Expect(std::to_string(dep["spec"]["replicas"].get<int>()) == replicas, "replicas = " + replicas);
    const json& ps = dep["spec"]["template"]["spec"];
    pod_labels = dep["spec"]["template"]["metadata"]["labels"];
    sa_name = ps.value("serviceAccountName", "");
    Expect(ps["securityContext"]["runAsNonRoot"] == true, "pod runAsNonRoot");
    Expect(ps["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", "pod seccomp RuntimeDefault");
    Expect(ps["containers"].size() == 1, "one container");
    const json& c = ps["containers"][0];
    const json& sc = c["securityContext"];
    Expect(sc["readOnlyRootFilesystem"] == true, "readOnlyRootFilesystem");
    Expect(sc["allowPrivilegeEscalation"] == false, "allowPrivilegeEscalation false");
    Expect(sc["runAsNonRoot"] == true, "container runAsNonRoot");
    Expect(sc["capabilities"]["drop"] == json({"ALL"}), "capabilities drop ALL");
    Expect(!sc["capabilities"].contains("add"), "no capabilities added");
    Expect(sc["seccompProfile"]["type"] == "RuntimeDefault", "container seccomp RuntimeDefault");
    Expect(c["resources"]["requests"].contains("cpu") && c["resources"]["requests"].contains("memory"),
           "cpu and memory requests");
    Expect(c["resources"]["limits"].contains("memory"), "memory limit");
    Expect(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness /healthz");
    Expect(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness /readyz");
    const json& args = c["args"];
    Expect(HasArg(args, "--leader-elect=true"), "--leader-elect=true");
    Expect(HasArg(args, "--leader-election-namespace=" + release_ns), "--leader-election-namespace");
    Expect(HasArg(args, "--metrics-addr=:8080"), "--metrics-addr=:8080");
    Expect(HasArg(args, "--log-level=" + log_level), "--log-level=" + log_level);
    std::string ns_arg;
    for (const auto& n : watch) ns_arg += (ns_arg.empty() ? "" : ",") + n;
    bool any_ns_arg = false;
    for (const json& a : args) any_ns_arg |= a.get<std::string>().rfind("--namespace=", 0) == 0;
    if (watch.empty()) {
      Expect(!any_ns_arg, "no --namespace when watching all namespaces");
    } else {
      Expect(HasArg(args, "--namespace=" + ns_arg), "--namespace=" + ns_arg);
    }
  }

  // ServiceAccounts.
  std::set<std::pair<std::string, std::string>> sas;  // (namespace, name)
  for (const json& sa : by_kind["ServiceAccount"]) {
    sas.insert({Str(sa["metadata"]["namespace"]), Str(sa["metadata"]["name"])});
  }
  Expect(sas.count({release_ns, sa_name}) == 1, "operator ServiceAccount " + sa_name + " exists");

  // RBAC: exactly what the operator's code uses (operator/cmd/permissions.cc);
  // the gang schedulers' PodGroups (create) only for the providers turned on.
  namespace cmd = hypertrain::operatorcmd;
  std::set<Triple> operator_rules, node_rules, lease_rules, gang_rules;
  const std::set<std::string> gang_on(gang.begin(), gang.end());
  for (const auto& p : cmd::OperatorPermissions()) {
    std::set<Triple>* into = p.scope == cmd::PermissionScope::kCluster            ? &node_rules
                             : p.scope == cmd::PermissionScope::kReleaseNamespace ? &lease_rules
                                                                                  : &operator_rules;
    if (!p.chart_switch.empty()) {
      const std::string prefix = "gangScheduling.";
      const bool on = p.chart_switch.rfind(prefix, 0) == 0 && gang_on.count(p.chart_switch.substr(prefix.size()));
      if (!on) continue;
      into = &gang_rules;
    }
    for (auto& t : Expand(p.group, {p.resource}, p.verbs)) into->insert(t);
  }

  std::map<std::string, std::set<Triple>> cluster_roles;
  for (const json& r : by_kind["ClusterRole"]) cluster_roles[r["metadata"]["name"]] = Rules(r);
  std::map<std::pair<std::string, std::string>, std::set<Triple>> roles;
  for (const json& r : by_kind["Role"]) roles[{Str(r["metadata"]["namespace"]), Str(r["metadata"]["name"])}] = Rules(r);

  for (const auto& [name, rules] : cluster_roles) {
    for (const auto& [g, res, v] : rules) {
      Expect(g != "*" && res != "*" && v != "*", "no wildcard in ClusterRole " + name);
    }
    Expect(rules == node_rules || (watch.empty() && (rules == operator_rules || (!gang.empty() && rules == gang_rules))),
           "ClusterRole " + name + " grants exactly the node or (all-namespaces) operator rules:" + Show(rules));
  }
  int op_cluster = 0, node_cluster = 0, gang_cluster = 0;
  for (const auto& [name, rules] : cluster_roles) {
    op_cluster += rules == operator_rules;
    node_cluster += rules == node_rules;
    gang_cluster += !gang.empty() && rules == gang_rules;
  }
  Expect(gang_cluster == (watch.empty() && !gang.empty() ? 1 : 0), "a PodGroup ClusterRole exactly for the gang providers on");
  Expect(node_cluster == 1, "one ClusterRole for nodes");
  Expect(op_cluster == (watch.empty() ? 1 : 0), watch.empty() ? "one operator ClusterRole" : "no operator ClusterRole");

  std::set<std::string> op_role_ns, gang_role_ns;
  bool lease_role = false;
  for (const auto& [key, rules] : roles) {
    const auto& [ns, name] = key;
    if (rules == operator_rules) {
      op_role_ns.insert(ns);
    } else if (!gang.empty() && rules == gang_rules) {
      gang_role_ns.insert(ns);
    } else if (rules == lease_rules && ns == release_ns) {
      lease_role = true;
    } else {
      // E.g. the old trainer Role (pods get/patch): it let the trainer patch any pod's image.
      Expect(false, "Role " + ns + "/" + name + " grants unexpected rules:" + Show(rules) +
                        "; the operator's rules are:" + Show(operator_rules));
    }
  }
  Expect(lease_role, "leader-election Role with" + Show(lease_rules) + " in " + release_ns);
  Expect(op_role_ns == std::set<std::string>(watch.begin(), watch.end()),
         "operator Roles exactly in the watched namespaces");
  Expect(gang_role_ns == (gang.empty() ? std::set<std::string>{} : std::set<std::string>(watch.begin(), watch.end())),
         "PodGroup Roles (create) in the watched namespaces when a gang provider is on");
  // Watched namespaces are rendered (kept on uninstall) so that a missing one
  // does not fail the install; `helm template` cannot look them up, so all are.
  std::set<std::string> namespaces;
  for (const json& n : by_kind["Namespace"]) {
    namespaces.insert(Str(n["metadata"]["name"]));
    Expect(n["metadata"]["annotations"].value("helm.sh/resource-policy", "") == "keep",
           "Namespace " + Str(n["metadata"]["name"]) + " is kept on uninstall");
  }
  Expect(namespaces == std::set<std::string>(watch.begin(), watch.end()),
         "a Namespace for each watched namespace, no other");

  // Every binding points at a rendered role and an existing ServiceAccount.
  for (const char* kind : {"RoleBinding", "ClusterRoleBinding"}) {
    for (const json& b : by_kind[kind]) {
      const std::string ref_kind = b["roleRef"]["kind"];
      const std::string ref = b["roleRef"]["name"];
      const std::string ns = b["metadata"].value("namespace", "");
      bool exists = ref_kind == "ClusterRole" ? cluster_roles.count(ref) > 0 : roles.count({ns, ref}) > 0;
      Expect(exists, std::string(kind) + " " + ns + "/" + b["metadata"]["name"].get<std::string>() +
                         " refers to a missing " + ref_kind + " " + ref);
      for (const json& s : b["subjects"]) {
        Expect(sas.count({Str(s["namespace"]), Str(s["name"])}) == 1,
               std::string(kind) + " subject " + s["namespace"].get<std::string>() + "/" +
                   s["name"].get<std::string>() + " is a rendered ServiceAccount");
      }
    }
  }

  // Metrics Service.
  bool metrics = false;
  for (const json& svc : by_kind["Service"]) {
    if (svc["spec"]["ports"][0]["name"] != "metrics") continue;
    metrics = true;
    Expect(svc["spec"]["ports"][0]["port"] == 8080, "metrics Service port 8080");
    for (auto& [k, v] : svc["spec"]["selector"].items()) {
      Expect(pod_labels.contains(k) && pod_labels[k] == v, "metrics Service selects the operator pods");
    }
  }
  Expect(metrics, "a metrics Service");

  // CRD (a template, so helm upgrade applies it): the source of truth's spec,
  // labelled as the release, kept on uninstall unless crds.keep=false.
  if (opt.count("crd")) {
    auto src = hypertrain::api::YamlFileToJson(opt["crd"]);
    Expect(src.ok(), "source CRD parses");
    const auto& crds = by_kind["CustomResourceDefinition"];
    if (opt["crd-install"] == "false") {
      Expect(crds.empty(), "no CRD with crds.install=false");
    } else {
      Expect(crds.size() == 1, "the chart renders one CRD");
      if (src.ok() && crds.size() == 1) {
        const json& crd = crds[0];
        Expect(crd["spec"] == (*src)["spec"], "rendered CRD spec equals crds/trainingjobs.hypertrain.dev.yaml");
        Expect(crd["metadata"]["name"] == (*src)["metadata"]["name"], "rendered CRD name");
        Expect(crd["metadata"]["labels"].value("app.kubernetes.io/managed-by", "") == "Helm", "CRD labelled as the release's");
        const bool keep = crd["metadata"].contains("annotations") &&
                          crd["metadata"]["annotations"].value("helm.sh/resource-policy", "") == "keep";
        Expect(keep == (opt["crd-keep"] != "false"), "CRD resource-policy keep follows crds.keep");
      }
    }
  }

  for (const auto& p : g_problems) std::cerr << "FAIL: " << p << "\n";
  std::cout << "chart_check " << argv[1] << ": " << (g_problems.empty() ? "ok" : "FAILED") << " ("
            << docs->size() << " objects)\n";
  return g_problems.empty() ? 0 : 1;
}
