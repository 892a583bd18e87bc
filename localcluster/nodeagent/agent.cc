#include "localcluster/nodeagent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/time.h"

namespace hypertrain::nodeagent {
namespace {

using kube::Json;
namespace fs = std::filesystem;

std::string Now() { return FormatRfc3339(std::chrono::system_clock::now()); }

std::string S(const Json& j, const Json::json_pointer& p) {
  return j.contains(p) && j[p].is_string() ? j[p].get<std::string>() : "";
}

// The files of the pod's ConfigMap volumes, each written atomically.
Status WriteVolumeFiles(const ProcessSpec& ps) {
  for (const auto& v : ps.volumes) {
    if (!v.host_path.empty()) continue;
    for (const auto& [rel, content] : v.files) {
      const std::string path = v.local_dir + "/" + rel;
      HT_RETURN_IF_ERROR(MakeDirs(fs::path(path).parent_path().string()));
      HT_RETURN_IF_ERROR(WriteFileAtomically(path, content));
    }
    HT_RETURN_IF_ERROR(MakeDirs(v.local_dir));  // an empty volume is still a directory
  }
  return {};
}

Json ReadyConditions(bool ready, const std::string& now) {
  const char* st = ready ? "True" : "False";
  Json out = Json::array();
  for (const char* t : {"PodScheduled", "Initialized", "ContainersReady", "Ready"}) {
    const bool sched = std::string(t) == "PodScheduled" || std::string(t) == "Initialized";
    out.push_back({{"type", t}, {"status", sched ? "True" : st}, {"lastTransitionTime", now}});
  }
  return out;
}

}  // namespace

namespace {

// The last `max_bytes` bytes of a file (all of a shorter one), verbatim.
std::string TailBytes(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - max_bytes : 0;
  f.seekg(start);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

std::string TailFile(const std::string& path, int max_lines, size_t max_bytes) {
  std::string data = TailBytes(path, 65536);
  // The last `max_lines` lines, each with its newline (kubelet's tail of a log).
  size_t from = data.size();
  int lines = 0;
  for (size_t i = data.size(); i > 0; --i) {
    if (data[i - 1] == '\n' && i != data.size() && ++lines == max_lines) break;
    from = i - 1;
  }
  data = data.substr(from);
  if (data.size() > max_bytes) data = data.substr(data.size() - max_bytes);
  return data;
}

std::string TerminationMessage(const std::string& termination_log, const std::string& container_log,
                               const std::string& policy, int exit_code) {
  std::string msg = TailBytes(termination_log, 4096);
  if (msg.empty() && policy == "FallbackToLogsOnError" && exit_code != 0) msg = TailFile(container_log, 80, 2048);
  return msg;
}

Agent::Agent(std::shared_ptr<kube::RestClient> client, AgentOptions opts)
    : client_(std::move(client)),
      opts_(std::move(opts)),
      nodes_(client_, kube::resources::kNodes),
      pods_(client_, kube::resources::kPods) {}

Agent::~Agent() {
  for (auto& [uid, p] : procs_) {
    if (!p.exited && p.pid > 0) {
      ::kill(-p.pid, SIGKILL);
      ::waitpid(p.pid, nullptr, 0);
    }
  }
}


std::vector<std::string> Agent::node_names() const {
  std::vector<std::string> out;
  for (int i = 0; i < opts_.nodes; ++i) out.push_back(opts_.node_prefix + std::to_string(i));
  return out;
}

Status Agent::RegisterNodes() {
  const std::vector<std::string> names = node_names();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    Json labels = {{"kubernetes.io/hostname", name},
                   {"kubernetes.io/os", "linux"},
                   {"node.kubernetes.io/instance-type", opts_.instance_type},
                   {"sagemaker.amazonaws.com/node-health-status", "Schedulable"},
                   {"hypertrain.dev/node-agent", "local"}};
    for (const auto& [k, v] : opts_.extra_labels) labels[k] = v;
    if (auto it = opts_.node_labels.find(static_cast<int>(i)); it != opts_.node_labels.end()) {
      for (const auto& [k, v] : it->second) labels[k] = v;
    }
    Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}},
                 {"spec", Json::object()}};
    auto created = nodes_.Create(node);
    if (!created.ok() && !kube::IsAlreadyExists(created.status())) return created.status();
  }
  last_heartbeat_ = {};
  Heartbeat();
  return {};
}

void Agent::Heartbeat() {
  const auto now_tp = std::chrono::steady_clock::now();
  if (now_tp - last_heartbeat_ < opts_.heartbeat) return;
  last_heartbeat_ = now_tp;
  const std::string now = Now();
  Json cap = Json::object();
  for (const auto& [k, v] : opts_.capacity) cap[k] = v;
  for (const std::string& name : node_names()) {
    Json status = {{"capacity", cap},
                   {"allocatable", cap},
                   {"addresses", Json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
                                              {{"type", "Hostname"}, {"address", name}}})},
                   {"conditions", Json::array({{{"type", "Ready"},
                                                {"status", "True"},
                                                {"reason", "KubeletReady"},
                                                {"message", "local node agent is posting ready status"},
                                                {"lastHeartbeatTime", now},
                                                {"lastTransitionTime", now}}})}};
    auto r = nodes_.PatchStatus(name, {{"status", status}});
    if (!r.ok()) spdlog::warn("heartbeat {}: {}", name, r.status().ToString());
  }
}

namespace {

// Forks the container's process in its own process group, its output to
// `log_path`; returns the pid, or -1 when fork fails.
pid_t Spawn(ProcessSpec& ps, const std::string& dir, const std::string& log_path) {
  std::vector<char*> argv, envp;
  for (auto& a : ps.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : ps.env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    if (::chdir(dir.c_str()) != 0) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    dprintf(2, "node-agent: exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  if (pid > 0) ::setpgid(pid, pid);  // also from the parent: no race with a fast kill
  return pid;
}

}  // namespace

std::map<std::string, Json> Agent::ConfigMapsOf(const Json& pod) {
  std::map<std::string, Json> cms;
  kube::ResourceClient cm_client(client_, kube::resources::kConfigMaps, S(pod, "/metadata/namespace"_json_pointer));
  auto want_cm = [&](const std::string& cm) {
    if (cm.empty() || cms.count(cm)) return;
    if (auto got = cm_client.Get(cm); got.ok()) cms[cm] = *got;
  };
  for (const Json& v : pod["spec"].value("volumes", Json::array())) {
    if (v.contains("configMap")) want_cm(v["configMap"].value("name", ""));
  }
  for (const Json& c : pod["spec"].value("containers", Json::array())) {
    for (const Json& e : c.value("env", Json::array())) {
      if (e.contains("/valueFrom/configMapKeyRef/name"_json_pointer)) {
        want_cm(e["valueFrom"]["configMapKeyRef"]["name"].get<std::string>());
      }
    }
  }
  return cms;
}

ProcessOptions Agent::ProcessOptionsFor(const std::string& pod_dir, const std::string& pod_kubeconfig) const {
  ProcessOptions po;
  po.pod_dir = pod_dir;
  po.image_map = opts_.image_map;
  po.extra_env = opts_.extra_env;
  if (!pod_kubeconfig.empty()) po.extra_env["KUBECONFIG"] = pod_kubeconfig;
  // The kubelet mounts an empty file at terminationMessagePath; the agent
  // cannot mount, so hypertrain's launcher is told where it is (Start makes it).
  po.extra_env["HYPERTRAIN_TERMINATION_LOG"] = pod_dir + "/termination-log";
  for (const char* k : {"PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH"}) {
    if (const char* v = std::getenv(k)) po.passthrough_env.push_back(std::string(k) + "=" + v);
  }
  return po;
}

void Agent::ReportRunning(const Json& pod, pid_t pid) {
  const std::string ns = S(pod, "/metadata/namespace"_json_pointer);
  const std::string name = S(pod, "/metadata/name"_json_pointer);
  const std::string now = Now();
  Json cs = {{"name", pod["spec"]["containers"][0].value("name", "main")},
             {"image", pod["spec"]["containers"][0].value("image", "")},
             {"ready", true},
             {"restartCount", 0},
             {"started", true},
             {"containerID", "local://" + std::to_string(pid)},
             {"state", {{"running", {{"startedAt", now}}}}}};
  auto r = pods_.InNamespace(ns).PatchStatus(
      name, {{"status", {{"phase", "Running"}, {"podIP", "127.0.0.1"}, {"hostIP", "127.0.0.1"},
                         {"startTime", now}, {"conditions", ReadyConditions(true, now)},
                         {"containerStatuses", Json::array({cs})}}}});
  if (!r.ok()) spdlog::warn("status of {}/{}: {}", ns, name, r.status().ToString());
}

void Agent::Start(const Json& pod) {
  const std::string ns = S(pod, "/metadata/namespace"_json_pointer);
  const std::string name = S(pod, "/metadata/name"_json_pointer);
  const std::string uid = S(pod, "/metadata/uid"_json_pointer);
  Proc p;
  p.ns = ns;
  p.name = name;
  p.uid = uid;
  p.node = S(pod, "/spec/nodeName"_json_pointer);
  if (pod.contains("/spec/containers/0/name"_json_pointer)) {
    p.container = S(pod, "/spec/containers/0/name"_json_pointer);
    p.image = S(pod, "/spec/containers/0/image"_json_pointer);
  }
  p.dir = opts_.work_dir + "/" + ns + "_" + name + "_" + uid.substr(0, 8);
  const Status pod_dir = MakeDirs(p.dir);
  if (pod.contains("/spec/containers/0/terminationMessagePolicy"_json_pointer)) {
    p.message_policy = S(pod, "/spec/containers/0/terminationMessagePolicy"_json_pointer);
  }
  std::string pod_kubeconfig = opts_.pod_kubeconfig;
  if (pod_dir.ok() && opts_.serviceaccount_tokens) {
    const std::string token_err = WriteServiceAccountKubeconfig(pod, p.dir);
    if (!token_err.empty()) {
      // A kubelet keeps such a pod in ContainerCreating and retries: so does the agent.
      if (start_errors_[uid] != token_err) spdlog::warn("{}/{}: not started yet: {}", ns, name, token_err);
      start_errors_[uid] = token_err;
      return;
    }
    pod_kubeconfig = p.dir + "/kubeconfig";
  }
  start_errors_.erase(uid);
  Status made = pod_dir;
  if (made.ok()) made = WriteFileAtomically(p.dir + "/termination-log", "");
  ProcessSpec ps;
  std::string err = made.ok() ? "" : "pod directory: " + made.message();
  const std::string log_path = p.dir + "/container.log";
  bool ok = made.ok() && BuildProcess(pod, ConfigMapsOf(pod), ProcessOptionsFor(p.dir, pod_kubeconfig), &ps, &err);
  if (ok) {
    if (Status w = WriteVolumeFiles(ps); !w.ok()) {
      ok = false;
      err = "volume: " + w.message();
    }
  }
  if (!ok) {
    // Kubelet reports such pods as waiting (CreateContainerConfigError); a
    // local agent cannot be fixed from outside, so fail the pod with the reason.
    spdlog::warn("{}/{} cannot start: {}", ns, name, err);
    p.exited = true;
    p.code = 128;
    p.message = "node-agent: " + err;
    if (Status w = WriteFileAtomically(log_path, "node-agent: " + err + "\n"); !w.ok()) {
      spdlog::warn("{}/{}: container log: {}", ns, name, w.message());
    }
    procs_[uid] = p;
    ReportExit(procs_[uid]);
    return;
  }
  const pid_t pid = Spawn(ps, p.dir, log_path);
  if (pid < 0) {
    spdlog::error("fork for {}/{}: {}", ns, name, std::strerror(errno));
    return;
  }
  p.pid = pid;
  p.started_at = Now();
  procs_[uid] = p;
  spdlog::info("started {}/{} on {} pid {} log {}", ns, name, p.node, pid, log_path);
  ReportRunning(pod, pid);
}

std::string Agent::WriteServiceAccountKubeconfig(const Json& pod, const std::string& dir) {
  const std::string ns = S(pod, "/metadata/namespace"_json_pointer);
  std::string sa = S(pod, "/spec/serviceAccountName"_json_pointer);
  if (sa.empty()) sa = "default";
  kube::Request r;
  r.method = "POST";
  r.path = "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token";
  r.body = Json{{"apiVersion", "authentication.k8s.io/v1"},
                {"kind", "TokenRequest"},
                {"spec",
                 {{"expirationSeconds", 3600},
                  {"boundObjectRef",
                   {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"name", S(pod, "/metadata/name"_json_pointer)},
                    {"uid", S(pod, "/metadata/uid"_json_pointer)}}}}}}
               .dump();
  auto res = client_->SendJson(r);
  if (!res.ok()) return "token for ServiceAccount " + ns + "/" + sa + ": " + res.status().ToString();
  const std::string token = res->value("status", Json::object()).value("token", "");
  if (token.empty()) return "token for ServiceAccount " + ns + "/" + sa + ": empty TokenRequest status";
  const kube::Config& cfg = client_->config();
  std::string ca_line;
  if (!cfg.ca_pem.empty()) {
    if (Status w = WriteFileAtomically(dir + "/ca.crt", cfg.ca_pem); !w.ok()) return "ca.crt: " + w.message();
    ca_line = "    certificate-authority: " + dir + "/ca.crt\n";
  }
  const std::string kubeconfig =
      "apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster:\n    server: " + cfg.server + "\n" +
      ca_line + "users:\n- name: " + sa + "\n  user:\n    token: " + token +
      "\ncontexts:\n- name: pod\n  context:\n    cluster: cluster\n    user: " + sa + "\n    namespace: " + ns +
      "\ncurrent-context: pod\n";
  if (Status w = WriteFileAtomically(dir + "/kubeconfig", kubeconfig, 0600); !w.ok()) {
    return "kubeconfig: " + w.message();
  }
  return "";
}

void Agent::ReportExit(Proc& p) {
  const std::string log_path = p.dir + "/container.log";
  const std::string now = Now();
  const std::string message = !p.message.empty() ? p.message
                              : TerminationMessage(p.dir + "/termination-log", log_path, p.message_policy, p.code);
  // As kubelet 1.26 reports it: no `signal` (kubelet never sets it; 128+N is the code).
  Json term = {{"exitCode", p.code},
               {"reason", p.code == 0 ? "Completed" : "Error"},
               {"startedAt", p.started_at.empty() ? now : p.started_at},
               {"finishedAt", now}};
  if (p.pid > 0) term["containerID"] = "local://" + std::to_string(p.pid);
  if (!message.empty()) term["message"] = message;
  Json cs = {{"name", p.container}, {"image", p.image}, {"ready", false}, {"restartCount", 0}, {"started", false},
             {"state", {{"terminated", term}}}};
  auto r = pods_.InNamespace(p.ns).PatchStatus(
      p.name, {{"status", {{"phase", p.code == 0 ? "Succeeded" : "Failed"},
                           {"conditions", ReadyConditions(false, now)},
                           {"containerStatuses", Json::array({cs})}}}});
  if (r.ok() || kube::IsNotFound(r.status())) p.status_reported = true;
  if (!r.ok() && !kube::IsNotFound(r.status())) {
    spdlog::warn("status of {}/{}: {}", p.ns, p.name, r.status().ToString());
  }
  spdlog::info("exited {}/{} code {}", p.ns, p.name, p.code);
}

void Agent::Reap() {
  for (auto& [uid, p] : procs_) {
    if (p.exited || p.pid <= 0) continue;
    int st = 0;
    const pid_t r = ::waitpid(p.pid, &st, WNOHANG);
    if (r != p.pid) continue;
    p.exited = true;
    p.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    ::kill(-p.pid, SIGKILL);  // stragglers of the group (the pod's "container" is gone)
    ReportExit(p);
  }
  for (auto& [uid, p] : procs_) {
    if (p.exited && !p.status_reported) ReportExit(p);
  }
}

void Agent::HandleDeletion(const Json& pod) {
  const std::string uid = S(pod, "/metadata/uid"_json_pointer);
  const std::string ns = S(pod, "/metadata/namespace"_json_pointer);
  const std::string name = S(pod, "/metadata/name"_json_pointer);
  auto it = procs_.find(uid);
  if (it != procs_.end() && !it->second.exited) {
    Proc& p = it->second;
    const auto now = std::chrono::steady_clock::now();
    if (!p.term_sent) {
      double grace = pod["spec"].value("terminationGracePeriodSeconds", 30.0);
      grace = std::min(grace, opts_.max_grace_s);
      ::kill(-p.pid, SIGTERM);
      p.term_sent = true;
      p.kill_at = now + std::chrono::milliseconds(static_cast<int64_t>(grace * 1000));
      spdlog::info("SIGTERM {}/{} pid {}", ns, name, p.pid);
    } else if (now >= p.kill_at) {
      ::kill(-p.pid, SIGKILL);
      spdlog::info("SIGKILL {}/{} pid {} after grace", ns, name, p.pid);
    }
    return;
  }
  kube::DeleteOptions d;
  d.grace_period_seconds = 0;
  d.precondition_uid = uid;
  auto r = pods_.InNamespace(ns).Delete(name, d);
  if (r.ok() || kube::IsNotFound(r.status())) {
    if (it != procs_.end()) procs_.erase(it);
  }
}

void Agent::Step() {
  Heartbeat();
  auto node_list = nodes_.List();
  auto pod_list = pods_.List();
  if (!node_list.ok() || !pod_list.ok()) {
    spdlog::warn("list: {}", !node_list.ok() ? node_list.status().ToString() : pod_list.status().ToString());
    return;
  }
  std::set<std::string> mine;
  for (const auto& n : node_names()) mine.insert(n);
  std::vector<Json> nodes;
  for (const Json& n : node_list->items) {
    if (mine.count(S(n, "/metadata/name"_json_pointer))) nodes.push_back(n);
  }
  std::set<std::string> seen;
  for (const Json& pod : pod_list->items) seen.insert(S(pod, "/metadata/uid"_json_pointer));
  Placement placement(nodes, pod_list->items);
  if (opts_.admit_pod_groups) AdmitPodGroups(pod_list->items, placement);
  std::map<std::string, std::pair<GangRef, std::vector<const Json*>>> gangs;
  for (const Json& pod : pod_list->items) {
    const std::string node = S(pod, "/spec/nodeName"_json_pointer);
    const std::string uid = S(pod, "/metadata/uid"_json_pointer);
    const std::string phase = S(pod, "/status/phase"_json_pointer);
    if (pod["metadata"].contains("deletionTimestamp")) {
      if (node.empty() || mine.count(node)) HandleDeletion(pod);
      continue;
    }
    if (node.empty()) {
      const std::string sched = S(pod, "/spec/schedulerName"_json_pointer);
      // Under a real kube-scheduler (--bind-pods=false) it binds, gates and gangs included.
      if (!opts_.bind_pods) continue;
      if (!sched.empty() && sched != "default-scheduler" && sched != opts_.scheduler_name) continue;
      if (Gated(pod)) {
        ReportPending(pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates");
      } else if (GangRef g = GangOf(pod); !g.name.empty()) {
        auto& entry = gangs[g.key()];
        entry.first = g;
        entry.second.push_back(&pod);
      } else {
        Schedule(pod, &placement);
      }
      continue;
    }
    if (!mine.count(node) || procs_.count(uid)) continue;
    if (phase == "Succeeded" || phase == "Failed") continue;
    if (phase == "Running") {
      // Its process belonged to an earlier agent (restart): the container is lost.
      Proc p;
      p.ns = S(pod, "/metadata/namespace"_json_pointer);
      p.name = S(pod, "/metadata/name"_json_pointer);
      p.uid = uid;
      if (pod.contains("/spec/containers/0/name"_json_pointer)) p.container = S(pod, "/spec/containers/0/name"_json_pointer);
      p.exited = true;
      p.code = 137;
      p.message = "node-agent: the container's process belonged to an earlier node agent and is gone";
      p.dir = opts_.work_dir + "/" + p.ns + "_" + p.name + "_" + uid.substr(0, 8);
      procs_[uid] = p;
      ReportExit(procs_[uid]);
      continue;
    }
    Start(pod);
  }
  for (auto& [key, gang] : gangs) {
    std::sort(gang.second.begin(), gang.second.end(), [](const Json* a, const Json* b) {
      return S(*a, "/metadata/name"_json_pointer) < S(*b, "/metadata/name"_json_pointer);
    });
    ScheduleGang(gang.first, gang.second, &placement);
  }
  Reap();
  // Forget pods that are gone and whose process has ended.
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (!seen.count(it->first) && it->second.exited) it = procs_.erase(it);
    else ++it;
  }
}

void Agent::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    Step();
    std::this_thread::sleep_for(opts_.poll);
  }
}

}  // namespace hypertrain::nodeagent
