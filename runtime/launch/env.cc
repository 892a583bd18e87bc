#include "runtime/launch/env.h"

#include <cerrno>
#include <cstdlib>

#include "contract/env.h"

namespace hypertrain::launch {

namespace env = contract::env;


StatusOr<int> ParseIntVar(const std::string& name, const std::string& value, int min, int max) {
  if (value.empty()) return InvalidArgument(name + " is set but empty");
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str() || *end != '\0') {
    return InvalidArgument(name + "='" + value + "' is not an integer");
  }
  if (v < min || v > max) {
    return InvalidArgument(name + "=" + value + " is out of range [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]");
  }
  return static_cast<int>(v);
}

namespace {

// Value of `name` or its alias; both set and different is an error.
StatusOr<std::string> Lookup(const EnvLookup& lookup, const char* name, const char* alias) {
  const char* a = lookup(name);
  const char* b = alias ? lookup(alias) : nullptr;
  if (a && b && std::string(a) != b) {
    return InvalidArgument(std::string(name) + "='" + a + "' and " + alias + "='" + b +
                           "' disagree");
  }
  if (a) return std::string(a);
  if (b) return std::string(b);
  return std::string();
}

StatusOr<int> LookupInt(const EnvLookup& lookup, const char* name, const char* alias, int dflt,
                        int min, int max) {
  HT_ASSIGN_OR_RETURN(std::string v, Lookup(lookup, name, alias));
  if (v.empty()) return dflt;
  return ParseIntVar(lookup(name) ? name : alias, v, min, max);
}

constexpr int kMaxRanks = 1 << 20;

// torchrun's symbolic --nproc-per-node values (Kubeflow's nprocPerNode default
// is "auto"): no number of ranks in them for the launcher.
bool IsSymbolicNproc(const std::string& v) { return v == "auto" || v == "gpu" || v == "cpu"; }

}  // namespace

StatusOr<NodeEnv> ParseNodeEnv(const EnvLookup& lookup) {
  NodeEnv n;
  HT_ASSIGN_OR_RETURN(n.master_addr, Lookup(lookup, env::kMasterAddr, env::kPetMasterAddr));
  HT_ASSIGN_OR_RETURN(n.master_port,
                      LookupInt(lookup, env::kMasterPort, env::kPetMasterPort, 29500, 1, 65535));
  HT_ASSIGN_OR_RETURN(std::string nnodes, Lookup(lookup, env::kNnodes, env::kPetNnodes));
  HT_ASSIGN_OR_RETURN(std::string node_rank, Lookup(lookup, env::kNodeRank, env::kPetNodeRank));
  // A Kubeflow PyTorchJob pod without torchrun's PET_ variables: WORLD_SIZE is
  // the number of pods and RANK this pod's index (master 0, worker i at i+1).
  // Only in the pod's own env: a rank's env has LOCAL_RANK from the launcher.
  const bool pytorchjob_pod = nnodes.empty() && node_rank.empty() && !lookup(env::kLocalRank) &&
                              lookup(env::kRank) && lookup(env::kWorldSize);
  if (pytorchjob_pod) {
    nnodes = lookup(env::kWorldSize);
    node_rank = lookup(env::kRank);
  }
  // A rank that torchrun or HyperPod's hyperpodrun started: their agents name
  // the node count and rank GROUP_WORLD_SIZE/GROUP_RANK (the rendezvous' word;
  // with an elastic --nnodes=min:max the pod's NNODES is a range).
  const bool torchrun_worker = lookup(env::kLocalRank) && lookup(env::kGroupRank) && lookup(env::kGroupWorldSize);
  if (torchrun_worker) {
    HT_ASSIGN_OR_RETURN(const int group_world, ParseIntVar(env::kGroupWorldSize, lookup(env::kGroupWorldSize), 1, kMaxRanks));
    HT_ASSIGN_OR_RETURN(const int group_rank, ParseIntVar(env::kGroupRank, lookup(env::kGroupRank), 0, kMaxRanks));
    const auto disagrees = [](const std::string& v, int want) {
      return !v.empty() && v.find(':') == std::string::npos && v != std::to_string(want);
    };
    if (disagrees(nnodes, group_world) || disagrees(node_rank, group_rank)) {
      return InvalidArgument("NNODES/NODE_RANK (" + (nnodes.empty() ? "-" : nnodes) + "/" +
                             (node_rank.empty() ? "-" : node_rank) + ") disagree with the torchrun agent's " +
                             "GROUP_WORLD_SIZE/GROUP_RANK (" + std::to_string(group_world) + "/" +
                             std::to_string(group_rank) + ")");
    }
    nnodes = std::to_string(group_world);
    node_rank = std::to_string(group_rank);
  }
  if (!nnodes.empty()) {
    // torchrun accepts "min:max" for elastic jobs; we run a fixed size only.
    const auto colon = nnodes.find(':');
    if (colon != std::string::npos) {
      const std::string lo = nnodes.substr(0, colon), hi = nnodes.substr(colon + 1);
      if (lo != hi) {
        return InvalidArgument("NNODES='" + nnodes +
                               "': elastic ranges are not supported; min must equal max");
      }
      nnodes = lo;
    }
    HT_ASSIGN_OR_RETURN(n.nnodes, ParseIntVar(pytorchjob_pod     ? env::kWorldSize
                                              : torchrun_worker ? env::kGroupWorldSize
                                                                : env::kNnodes,
                                              nnodes, 1, kMaxRanks));
  }
  if (!node_rank.empty()) {
    const char* name = pytorchjob_pod    ? env::kRank
                       : torchrun_worker ? env::kGroupRank
                       : lookup(env::kNodeRank) ? env::kNodeRank : env::kPetNodeRank;
    HT_ASSIGN_OR_RETURN(n.node_rank, ParseIntVar(name, node_rank, 0, kMaxRanks));
  }
  if (n.node_rank >= n.nnodes) {
    return InvalidArgument("NODE_RANK=" + std::to_string(n.node_rank) + " must be < NNODES=" +
                           std::to_string(n.nnodes));
  }
  HT_ASSIGN_OR_RETURN(std::string nproc, Lookup(lookup, env::kNprocPerNode, env::kPetNprocPerNode));
  if (IsSymbolicNproc(nproc)) {
    n.nproc_hint = nproc;
  } else if (!nproc.empty()) {
    HT_ASSIGN_OR_RETURN(n.nproc_per_node,
                        ParseIntVar(lookup(env::kNprocPerNode) ? env::kNprocPerNode : env::kPetNprocPerNode, nproc,
                                    1, 4096));
  }
  if (!pytorchjob_pod) {
    HT_ASSIGN_OR_RETURN(n.world_size, LookupInt(lookup, env::kWorldSize, nullptr, 0, 1, kMaxRanks));
  }
  if (n.master_addr.empty()) {
    if (n.nnodes > 1) return InvalidArgument("MASTER_ADDR (or PET_MASTER_ADDR) is required when NNODES > 1");
    n.master_addr = "127.0.0.1";
  }
  if (const char* agent = lookup(env::kTorchelasticUseAgentStore);
      agent && (std::string(agent) == "True" || std::string(agent) == "true" || std::string(agent) == "1")) {
    if (n.master_port >= 65535) {
      return InvalidArgument("MASTER_PORT=65535 is the torchrun agent's store (TORCHELASTIC_USE_AGENT_STORE): "
                             "hypertrain's store needs MASTER_PORT + 1");
    }
    n.store_port = n.master_port + 1;
  }
  const char* job = lookup(env::kJobName);
  n.job_id = job && *job ? job : "default";
  if (n.job_id.find_first_of("/\n") != std::string::npos) {
    return InvalidArgument(std::string(env::kJobName) + "='" + n.job_id + "' must not contain '/' or newlines");
  }
  HT_ASSIGN_OR_RETURN(n.restart_attempt, LookupInt(lookup, env::kRestartAttempt, nullptr, 0, 0, 1 << 30));
  return n;
}

StatusOr<int> LocalWorldSize(const NodeEnv& node, int flag) {
  const int nproc = flag > 0 ? flag : node.nproc_per_node;
  if (nproc == 0) {
    if (!node.nproc_hint.empty()) {
      return InvalidArgument("NPROC_PER_NODE/PET_NPROC_PER_NODE is '" + node.nproc_hint +
                             "' (torchrun's, e.g. a PyTorchJob's nprocPerNode default): give --nproc-per-node");
    }
    return InvalidArgument("--nproc-per-node is not given and NPROC_PER_NODE/PET_NPROC_PER_NODE are unset");
  }
  // Kubeflow's PyTorchJob sets WORLD_SIZE to the number of pods: a node count,
  // not a rank count, and no contradiction.
  const bool pod_count = node.world_size == node.nnodes;
  if (node.world_size != 0 && !pod_count && node.world_size != node.nnodes * nproc) {
    return InvalidArgument("WORLD_SIZE=" + std::to_string(node.world_size) + " disagrees with NNODES (" +
                           std::to_string(node.nnodes) + ") x " + std::to_string(nproc) + " ranks per node" +
                           (flag > 0 ? " (--nproc-per-node)" : " (NPROC_PER_NODE)"));
  }
  return nproc;
}

StatusOr<RankEnv> ParseRankEnv(const EnvLookup& lookup, bool require_rank_vars) {
  RankEnv r;
  HT_ASSIGN_OR_RETURN(r.node, ParseNodeEnv(lookup));
  const char* names[] = {env::kWorldSize, env::kRank, env::kLocalRank, env::kLocalWorldSize};
  int present = 0;
  for (const char* n : names) present += lookup(n) != nullptr;
  if (present == 0 && !require_rank_vars) {
    r.world_size = r.node.nnodes * (r.node.nproc_per_node > 0 ? r.node.nproc_per_node : 1);
    if (r.world_size != 1) {
      return InvalidArgument("NNODES/NPROC_PER_NODE describe " + std::to_string(r.world_size) +
                             " ranks but RANK/WORLD_SIZE are unset: start ranks with `hypertrain launch`");
    }
    return r;
  }
  for (const char* n : names) {
    if (!lookup(n)) {
      return InvalidArgument(std::string(n) +
                             " is unset (WORLD_SIZE, RANK, LOCAL_RANK and LOCAL_WORLD_SIZE go together; "
                             "`hypertrain launch` sets them)");
    }
  }
  HT_ASSIGN_OR_RETURN(r.world_size, ParseIntVar(env::kWorldSize, lookup(env::kWorldSize), 1, kMaxRanks));
  HT_ASSIGN_OR_RETURN(r.rank, ParseIntVar(env::kRank, lookup(env::kRank), 0, kMaxRanks));
  HT_ASSIGN_OR_RETURN(r.local_world_size,
                      ParseIntVar(env::kLocalWorldSize, lookup(env::kLocalWorldSize), 1, 4096));
  HT_ASSIGN_OR_RETURN(r.local_rank, ParseIntVar(env::kLocalRank, lookup(env::kLocalRank), 0, 4095));
  auto s = [](int v) { return std::to_string(v); };
  if (r.rank >= r.world_size) {
    return InvalidArgument("RANK=" + s(r.rank) + " must be < WORLD_SIZE=" + s(r.world_size));
  }
  if (r.local_rank >= r.local_world_size) {
    return InvalidArgument("LOCAL_RANK=" + s(r.local_rank) + " must be < LOCAL_WORLD_SIZE=" +
                           s(r.local_world_size));
  }
  if (r.node.nproc_per_node > 0 && r.node.nproc_per_node != r.local_world_size) {
    return InvalidArgument("NPROC_PER_NODE=" + s(r.node.nproc_per_node) +
                           " disagrees with LOCAL_WORLD_SIZE=" + s(r.local_world_size));
  }
  if (r.world_size != r.node.nnodes * r.local_world_size) {
    return InvalidArgument("WORLD_SIZE=" + s(r.world_size) + " must equal NNODES (" +
                           s(r.node.nnodes) + ") x LOCAL_WORLD_SIZE (" + s(r.local_world_size) + ")");
  }
  if (r.rank != r.node.node_rank * r.local_world_size + r.local_rank) {
    return InvalidArgument("RANK=" + s(r.rank) + " must equal NODE_RANK (" + s(r.node.node_rank) +
                           ") x LOCAL_WORLD_SIZE (" + s(r.local_world_size) + ") + LOCAL_RANK (" +
                           s(r.local_rank) + ")");
  }
  return r;
}

}  // namespace hypertrain::launch
