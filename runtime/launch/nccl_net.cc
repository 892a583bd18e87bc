#include "runtime/launch/nccl_net.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <filesystem>

namespace hypertrain::launch {
namespace {

namespace fs = std::filesystem;

std::optional<NcclNetPlugin> TryLoad(const std::string& name) {
  void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return std::nullopt;
  NcclNetPlugin p;
  for (int v = 12; v >= 2; --v) {
    for (const char* prefix : {"ncclNetPlugin_v", "ncclNet_v"}) {
      const std::string sym = prefix + std::to_string(v);
      if (dlsym(h, sym.c_str()) != nullptr) p.entry_points.push_back(sym);
    }
  }
  link_map* map = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) p.path = map->l_name;
  dlclose(h);
  if (p.entry_points.empty()) return std::nullopt;
  if (p.path.empty()) p.path = name;
  return p;
}

}  // namespace

std::string DetectEfa(const std::string& sysfs_root, const GetEnv& env) {
  std::error_code ec;
  for (const auto& dev : fs::directory_iterator(fs::path(sysfs_root) / "class" / "infiniband", ec)) {
    const std::string name = dev.path().filename().string();
    std::error_code ec2;
    const std::string driver = fs::read_symlink(dev.path() / "device" / "driver", ec2).filename().string();
    if (name.find("efa") != std::string::npos || driver == "efa") {
      return "EFA device " + name + " in " + (fs::path(sysfs_root) / "class" / "infiniband").string();
    }
  }
  if (const char* p = env("FI_PROVIDER"); p != nullptr && std::strcmp(p, "efa") == 0) return "FI_PROVIDER=efa";
  return "";
}

NcclNetPreflight CheckNcclNet(const GetEnv& env, const std::string& sysfs_root) {
  NcclNetPreflight out;
  out.efa_evidence = DetectEfa(sysfs_root, env);
  const char* chosen = env("NCCL_NET_PLUGIN");
  if (chosen != nullptr && std::strcmp(chosen, "none") == 0) return out;
  if (chosen == nullptr || *chosen == '\0') {
    out.tried = {"libnccl-net.so"};
  } else {
    out.tried = {std::string("libnccl-net-") + chosen + ".so", chosen};
  }
  for (const std::string& name : out.tried) {
    if ((out.plugin = TryLoad(name))) break;
  }
  return out;
}

PreflightMessage Describe(const NcclNetPreflight& p) {
  const std::string efa = p.efa_evidence.empty() ? "no EFA devices" : p.efa_evidence;
  if (p.plugin) {
    return {false, "NCCL net plugin: " + p.plugin->path + " (" + p.plugin->entry_points.front() + "); " + efa};
  }
  std::string tried;
  for (const std::string& t : p.tried) tried += (tried.empty() ? "" : ", ") + t;
  if (p.tried.empty()) tried = "none: NCCL_NET_PLUGIN=none";
  if (!p.efa_evidence.empty()) {
    return {true,
            "EFA NODE WITHOUT AN NCCL NET PLUGIN (" + p.efa_evidence + "; looked for " + tried +
                " on the loader path): NCCL will fall back to TCP sockets and inter-node collectives will be "
                "several times slower. Use the trainer image (aws-ofi-nccl in /opt/amazon/ofi-nccl/lib on "
                "LD_LIBRARY_PATH) or install aws-ofi-nccl; NCCL_DEBUG=INFO shows what NCCL loads."};
  }
  return {false, "NCCL net plugin: none (looked for " + tried + "); " + efa +
                     ": NCCL uses its built-in transports (NVLink/PCIe in a node, sockets or InfiniBand between nodes)"};
}

}  // namespace hypertrain::launch
