// node-agent: runs pods of a (local) Kubernetes API server as local processes.
//   node-agent --kubeconfig F --nodes 2 --image-map hypertrain:local=/path/hypertrain --work-dir D
// See docs/NODE_AGENT.md.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "core/atomic_file.h"
#include "core/log.h"
#include "kube/config.h"
#include "localcluster/nodeagent/agent.h"

namespace {

using hypertrain::nodeagent::AgentOptions;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

constexpr char kUsage[] =
    "usage: node-agent --kubeconfig FILE [--nodes N] [--node-prefix P] [--instance-type T]\n"
    "                  [--capacity RES=QTY]... [--label K=V]... [--node-label INDEX:K=V]... [--image-map IMAGE=PATH]...\n"
    "                  [--image-map-file FILE] [--work-dir DIR] [--pod-kubeconfig FILE]\n"
    "                  [--env NAME=VALUE]... [--scheduler-name NAME] [--admit-pod-groups] [--max-grace-s S]\n"
    "                  [--poll-ms MS] [--pid-file FILE] [--pod-credentials serviceaccount] [--bind-pods true|false]\n"
    "                  [--log-format text|json] [--log-level LEVEL]\n";

bool SplitKV(const std::string& s, std::string* k, std::string* v) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *k = s.substr(0, eq);
  *v = s.substr(eq + 1);
  return true;
}

struct Flags {
  hypertrain::nodeagent::AgentOptions opts;
  std::string kubeconfig, pid_file, log_format = "text", log_level = "info";
};

// IMAGE=PATH lines ('#' starts a comment line).
std::string ReadImageMapFile(const std::string& file, std::map<std::string, std::string>* image_map) {
  auto text = hypertrain::ReadFileToString(file);
  if (!text.ok()) return "cannot read " + file + ": " + text.status().message();
  std::istringstream lines(*text);
  std::string k, v;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (!SplitKV(line, &k, &v)) return "bad line in " + file + ": " + line;
    (*image_map)[k] = std::filesystem::absolute(v).string();
  }
  return "";
}

// Applies one flag; returns what is wrong with it ("" when nothing is). May
// throw std::exception on a malformed number.
std::string ApplyFlag(const std::string& a, const std::string& val, Flags* f) {
  AgentOptions& opts = f->opts;
  std::string k, v;
  if (a == "--kubeconfig") f->kubeconfig = val;
  else if (a == "--nodes") {
    opts.nodes = std::stoi(val);
    if (opts.nodes < 1 || opts.nodes > 64) return "--nodes must be in [1, 64]";
  } else if (a == "--node-prefix") opts.node_prefix = val;
  else if (a == "--instance-type") opts.instance_type = val;
  else if (a == "--capacity") {
    if (!SplitKV(val, &k, &v) || !hypertrain::nodeagent::ParseQuantity(v)) return "bad --capacity " + val;
    opts.capacity[k] = v;
  } else if (a == "--label") {
    if (!SplitKV(val, &k, &v)) return "bad --label " + val;
    opts.extra_labels[k] = v;
  } else if (a == "--node-label") {
    const size_t colon = val.find(':');
    if (colon == std::string::npos || !SplitKV(val.substr(colon + 1), &k, &v)) {
      return "bad --node-label " + val + " (want INDEX:KEY=VALUE)";
    }
    const int index = std::stoi(val.substr(0, colon));
    if (index < 0) return "bad --node-label index in " + val;
    opts.node_labels[index][k] = v;
  } else if (a == "--admit-pod-groups") {
    opts.admit_pod_groups = val.empty() || val == "true";
  } else if (a == "--env") {
    if (!SplitKV(val, &k, &v)) return "bad --env " + val + " (want NAME=VALUE)";
    opts.extra_env[k] = v;
  } else if (a == "--image-map") {
    if (!SplitKV(val, &k, &v)) return "bad --image-map " + val + " (want IMAGE=PATH)";
    opts.image_map[k] = std::filesystem::absolute(v).string();
  } else if (a == "--image-map-file") return ReadImageMapFile(val, &opts.image_map);
  else if (a == "--work-dir") opts.work_dir = std::filesystem::absolute(val).string();
  else if (a == "--pod-kubeconfig") opts.pod_kubeconfig = std::filesystem::absolute(val).string();
  else if (a == "--scheduler-name") opts.scheduler_name = val;
  else if (a == "--pod-credentials") {
    if (val != "serviceaccount") return "--pod-credentials must be serviceaccount";
    opts.serviceaccount_tokens = true;
  } else if (a == "--bind-pods") {
    if (val != "true" && val != "false") return "--bind-pods must be true or false";
    opts.bind_pods = val == "true";
  } else if (a == "--max-grace-s") opts.max_grace_s = std::stod(val);
  else if (a == "--poll-ms") opts.poll = std::chrono::milliseconds(std::max(20, std::stoi(val)));
  else if (a == "--pid-file") f->pid_file = val;
  else if (a == "--log-format") f->log_format = val;
  else if (a == "--log-level") f->log_level = val;
  else return "unknown flag " + a;
  return "";
}

// 0: go on; -1: --help printed; else what is wrong is in *err.
int ParseFlags(int argc, char** argv, Flags* f, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
    if (a == "--help" || a == "-h") return -1;
    if (const size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a != "--admit-pod-groups") {
      if (i + 1 >= argc) {
        *err = a + " needs a value";
        return 2;
      }
      val = argv[++i];
    }
    try {
      *err = ApplyFlag(a, val, f);
    } catch (const std::exception&) {
      *err = "bad value for " + a + ": " + val;
    }
    if (!err->empty()) return 2;
  }
  if (f->kubeconfig.empty()) *err = "--kubeconfig is required";
  return err->empty() ? 0 : 2;
}

// Registers the nodes, retrying while the API server comes up.
hypertrain::Status RegisterNodes(hypertrain::nodeagent::Agent& agent) {
  for (int attempt = 0;; ++attempt) {
    auto r = agent.RegisterNodes();
    if (r.ok() || attempt >= 20 || g_stop) return r;
    spdlog::warn("registering nodes (attempt {}): {}", attempt + 1, r.ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(250 * (attempt + 1)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  AgentOptions& opts = f.opts;
  auto fail = [](const std::string& m) {
    std::cerr << "node-agent: " << m << "\n" << kUsage;
    return 2;
  };
  std::string err;
  if (int rc = ParseFlags(argc, argv, &f, &err); rc != 0) {
    if (rc < 0) std::cout << kUsage;
    return rc < 0 ? 0 : fail(err);
  }
  if (auto s = hypertrain::log::Init(f.log_format, f.log_level, {{"component", "node-agent"}}); !s.ok()) {
    return fail(s.message());
  }
  if (opts.serviceaccount_tokens && !opts.pod_kubeconfig.empty()) {
    return fail("--pod-credentials serviceaccount and --pod-kubeconfig exclude each other");
  }
  for (const auto& [image, path] : opts.image_map) {
    if (::access(path.c_str(), X_OK) != 0) return fail("image " + image + ": " + path + " is not executable");
  }
  auto cfg = kube::LoadKubeconfig({f.kubeconfig});
  if (!cfg.ok()) return fail(cfg.status().ToString());
  auto client = kube::RestClient::Create(*cfg);
  if (!client.ok()) return fail(client.status().ToString());
  if (opts.work_dir.empty()) {
    char tmpl[] = "/tmp/node-agent-XXXXXX";
    if (!mkdtemp(tmpl)) {
      spdlog::error("cannot create a work directory under /tmp: {}", std::strerror(errno));
      return 1;
    }
    opts.work_dir = tmpl;
  }
  if (auto s = hypertrain::MakeDirs(opts.work_dir); !s.ok()) {
    spdlog::error("work directory: {}", s.ToString());
    return 1;
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  hypertrain::nodeagent::Agent agent(*client, opts);
  if (auto r = RegisterNodes(agent); !r.ok()) {
    spdlog::error("registering nodes: {}", r.ToString());
    return 1;
  }
  if (!f.pid_file.empty()) {
    if (auto s = hypertrain::WriteFileAtomically(f.pid_file, std::to_string(::getpid()) + "\n"); !s.ok()) {
      spdlog::error("pid file: {}", s.ToString());
      return 1;
    }
  }
  spdlog::info("{} node(s) registered; pod logs under {}/<namespace>_<pod>_<uid>/container.log", opts.nodes,
               opts.work_dir);
  agent.Run(g_stop);
  spdlog::info("stopping; killing remaining pod processes");
  return 0;
}
