#pragma once
// The local node agent: a kubelet + scheduler stand-in for one machine.
// Registers Nodes, binds pending pods to them, runs each pod's container as a
// local process (process group = pod), reports pod status, honours deletion.
// Logs through spdlog (what it binds, starts, signals and reaps; API errors).
// See docs/NODE_AGENT.md.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/nodeagent/placement.h"
#include "localcluster/nodeagent/pod_spec.h"

namespace hypertrain::nodeagent {

struct AgentOptions {
  int nodes = 2;
  std::string node_prefix = "local-node-";
  std::string instance_type = "ml.local.cpu";
  std::map<std::string, std::string> capacity = {{"cpu", "8"},  {"memory", "32Gi"},
                                                 {"pods", "16"}, {"nvidia.com/gpu", "0"},
                                                 {"vpc.amazonaws.com/efa", "0"}};
  std::map<std::string, std::string> extra_labels;
  std::map<int, std::map<std::string, std::string>> node_labels;  // by node index (e.g. topology)
  // Play Kueue's pod-group admission: remove the kueue.x-k8s.io/admission gate
  // from a group's pods once all of them exist and fit at once (node capacity
  // is the quota), never from part of a group.
  bool admit_pod_groups = false;
  std::string scheduler_name = "hypertrain-local";  // also binds default-scheduler pods
  std::map<std::string, std::string> image_map;
  std::string work_dir;          // per-pod directories and logs
  std::map<std::string, std::string> extra_env;  // set in every process (after the pod's env)
  std::string pod_kubeconfig;    // injected as KUBECONFIG into processes ("" = none)
  // Each pod's process gets its own kubeconfig with a token of the pod's
  // ServiceAccount (TokenRequest API, bound to the pod), as a kubelet mounts
  // one: RBAC then applies to what the pod does. Excludes pod_kubeconfig.
  bool serviceaccount_tokens = false;
  // Bind pending pods to the agent's nodes (its own scheduler). False when the
  // cluster runs kube-scheduler.
  bool bind_pods = true;
  double max_grace_s = 10;       // cap on terminationGracePeriodSeconds
  std::chrono::milliseconds poll{200};
  std::chrono::milliseconds heartbeat{2000};
};

class Agent {
 public:
  Agent(std::shared_ptr<kube::RestClient> client, AgentOptions opts);
  ~Agent();  // kills remaining process groups (SIGKILL) and reaps them

  // Creates the Nodes (or adopts existing ones, keeping their labels).
  Status RegisterNodes();
  // One pass: heartbeats, scheduling, starting, reaping, deletion.
  void Step();
  // Step() every opts.poll until `stop` is set.
  void Run(const std::atomic<bool>& stop);

  std::vector<std::string> node_names() const;

 private:
  struct Proc {
    pid_t pid = -1;
    std::string ns, name, uid, node, dir, container = "main", image;
    bool exited = false;
    int code = 0;
    bool term_sent = false;
    std::chrono::steady_clock::time_point kill_at;
    bool status_reported = false;
    std::string message_policy = "File";  // the container's terminationMessagePolicy
    std::string message;                  // the agent's own reason (start failures)
    std::string started_at;               // RFC 3339, when it was started
  };
  void Heartbeat();
  void Schedule(const kube::Json& pod, Placement* placement);
  // Binds the pending pods of one coscheduling/Volcano gang all at once, when
  // its PodGroup's minMember are there and fit; `members` are the gang's pending pods.
  void ScheduleGang(const GangRef& gang, const std::vector<const kube::Json*>& members, Placement* placement);
  void AdmitPodGroups(const std::vector<kube::Json>& pods, Placement placement);
  bool Bind(const kube::Json& pod, const std::string& node);
  void ReportPending(const kube::Json& pod, const std::string& reason, const std::string& message);
  void Start(const kube::Json& pod);
  // The ConfigMaps a pod's volumes and env refer to (those that exist).
  std::map<std::string, kube::Json> ConfigMapsOf(const kube::Json& pod);
  ProcessOptions ProcessOptionsFor(const std::string& pod_dir, const std::string& pod_kubeconfig) const;
  void ReportRunning(const kube::Json& pod, pid_t pid);
  void Reap();
  void ReportExit(Proc& p);
  void HandleDeletion(const kube::Json& pod);
  // Writes <dir>/kubeconfig with a token of the pod's ServiceAccount; error text on failure.
  std::string WriteServiceAccountKubeconfig(const kube::Json& pod, const std::string& dir);

  std::shared_ptr<kube::RestClient> client_;
  AgentOptions opts_;
  kube::ResourceClient nodes_, pods_;
  std::map<std::string, Proc> procs_;  // pod uid → process
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::map<std::string, std::string> start_errors_;  // pod uid → last reason it could not start (logged once)
};

// The container's termination message as kubelet 1.26 reports it (measured on
// a real kubelet, tests/e2e:termination_parity_*): the termination log file's
// last 4096 bytes, verbatim; when that is empty, the policy is
// FallbackToLogsOnError and the container failed, the last 2048 bytes of its
// log's last 80 lines, verbatim (newlines kept).
std::string TerminationMessage(const std::string& termination_log, const std::string& container_log,
                               const std::string& policy, int exit_code);

// Last `max_lines` lines of a file with their newlines, at most the last `max_bytes` bytes.
std::string TailFile(const std::string& path, int max_lines, size_t max_bytes);

}  // namespace hypertrain::nodeagent
