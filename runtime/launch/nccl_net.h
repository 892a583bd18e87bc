#pragma once
// Before ranks start, `hypertrain launch` says which NCCL network plugin NCCL
// will load and whether this node has EFA, and warns loudly when an EFA node
// has no plugin: NCCL then falls back to TCP sockets, several times slower
// for the gradient all-reduce (images/README.md, "EFA and NCCL").
//
// The plugin is found the way NCCL looks for it: NCCL_NET_PLUGIN=X tries
// "libnccl-net-X.so", then "X" itself ("none" disables plugins); unset, it is
// "libnccl-net.so"; each name goes through the dynamic loader's search path
// (LD_LIBRARY_PATH, where the trainer image puts /opt/amazon/ofi-nccl/lib).
// A library counts only if it exports a plugin entry point
// (ncclNetPlugin_vN, or ncclNet_vN of older plugins).
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hypertrain::launch {

using GetEnv = std::function<const char*(const char*)>;

struct NcclNetPlugin {
  std::string path;                      // the file the loader opened
  std::vector<std::string> entry_points;  // e.g. {"ncclNetPlugin_v9", "ncclNetPlugin_v8"}, newest first
};

struct NcclNetPreflight {
  std::vector<std::string> tried;        // library names, in NCCL's order (empty: NCCL_NET_PLUGIN=none)
  std::optional<NcclNetPlugin> plugin;   // the first that loads and has an entry point
  std::string efa_evidence;              // why this is an EFA node ("" if not)
};

// EFA devices under <sysfs>/class/infiniband (a device whose name contains
// "efa" or whose driver is efa), or FI_PROVIDER=efa; the evidence, else "".
std::string DetectEfa(const std::string& sysfs_root, const GetEnv& env);

// Looks for the plugin (dlopen, then dlclose: NCCL loads it again itself).
NcclNetPreflight CheckNcclNet(const GetEnv& env, const std::string& sysfs_root = "/sys");

// One log line for the result; `warn` when an EFA node has no plugin.
struct PreflightMessage {
  bool warn = false;
  std::string text;
};
PreflightMessage Describe(const NcclNetPreflight& p);

}  // namespace hypertrain::launch
