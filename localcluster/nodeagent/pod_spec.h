#pragma once
// Pure helpers of the local node agent (no I/O): resource quantities, the
// scheduling predicates (nodeSelector, required node affinity, taints and
// tolerations, capacity) and the translation of a pod's container into a
// local process (argv, env, volume directories). See docs/NODE_AGENT.md.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hypertrain::nodeagent {

using Json = nlohmann::json;

// Parses a Kubernetes quantity ("2", "500m", "640Gi", "1e3", "16G") into a
// double (cores for cpu, bytes for memory). nullopt on malformed input.
std::optional<double> ParseQuantity(const std::string& q);

// Sum of the container requests of a pod (limits when a request is absent, as
// the API server defaults them), plus "pods" = 1.
std::map<std::string, double> PodRequests(const Json& pod);

// True when the pod's nodeSelector and required node affinity match `node`.
// `why` names the first mismatch.
bool MatchesNode(const Json& pod, const Json& node, std::string* why);
// True when every NoSchedule/NoExecute taint of the node is tolerated.
bool ToleratesTaints(const Json& pod, const Json& node, std::string* why);
// A pod already placed on a node (bound or being bound, not terminated).
struct PlacedPod {
  std::string ns, node;
  Json labels;
};

// Whether `labels` satisfy a LabelSelector (matchLabels and matchExpressions
// In/NotIn/Exists/DoesNotExist); an empty or missing selector matches nothing,
// as in pod affinity terms.
bool SelectorMatches(const Json& selector, const Json& labels);

// Required inter-pod affinity and anti-affinity of `pod` on `node`: every
// required podAffinity term needs a placed pod of the term's namespaces (the
// pod's own by default) matching its selector on a node with the same value
// of the term's topologyKey, unless no such pod exists anywhere and the pod
// matches its own term (the first pod of a group goes anywhere, as in
// kube-scheduler); no required podAntiAffinity term may have one. `nodes` by
// name. Preferred terms are not evaluated.
bool MatchesPodAffinity(const Json& pod, const Json& node, const std::vector<PlacedPod>& placed,
                        const std::map<std::string, Json>& nodes, std::string* why);

// True when `requests` fit into the node's allocatable minus `used`.
bool Fits(const std::map<std::string, double>& requests, const std::map<std::string, double>& used,
          const Json& node, std::string* why);

// What the agent runs for one container.
struct ProcessSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=value
  // mountPath → local directory to create; configmap files to write there.
  struct Volume {
    std::string mount_path;
    std::string local_dir;
    std::map<std::string, std::string> files;  // relative path → content
    std::string config_map;                    // name when a ConfigMap volume
    std::string host_path;                     // hostPath: used as-is
  };
  std::vector<Volume> volumes;
};

struct ProcessOptions {
  std::string pod_dir;                                 // per-pod directory
  std::map<std::string, std::string> image_map;       // image → local binary
  std::map<std::string, std::string> extra_env;       // added (e.g. KUBECONFIG)
  std::vector<std::string> passthrough_env;           // NAME=value from the agent (PATH, HOME)
  std::string loopback = "127.0.0.1";
};

// Builds the process of the pod's first container. `config_maps` maps a
// ConfigMap name to its object (data). Errors are returned as a message.
// Rewrites, documented in docs/NODE_AGENT.md:
//  - command[0] is replaced by the image's local binary (--image-map);
//  - env valueFrom.fieldRef (metadata.name/namespace/uid, labels['k'],
//    annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP,
//    status.hostIP) and configMapKeyRef are resolved; $(VAR) expanded;
//  - an env value that is a cluster DNS name (…​.svc or …​.svc.cluster.local)
//    becomes the loopback address;
//  - an env value, command or arg equal to a volume's mountPath, or under it,
//    is rewritten to the volume's local directory.
bool BuildProcess(const Json& pod, const std::map<std::string, Json>& config_maps, const ProcessOptions& opts,
                  ProcessSpec* out, std::string* error);

// Expands $(VAR) from `vars` ($$ escapes); unknown references stay verbatim.
std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& vars);
bool IsClusterDnsName(const std::string& s);

}  // namespace hypertrain::nodeagent
