#pragma once
// Reading the rendezvous environment of contract/env.h (docs/DISTRIBUTED.md).
// The operator injects the node variables into every pod; `hypertrain launch`
// adds the per-rank ones. torchrun-style PET_* aliases are accepted where the
// plain name is unset.
#include <string>

#include "core/env_lookup.h"
#include "core/status.h"

namespace hypertrain::launch {

// Reads one variable; nullptr when unset (core/env_lookup.h). Injected so
// tests need no setenv; the process's is hypertrain::ProcessEnvironment().
using EnvLookup = ::hypertrain::EnvLookup;

// What every pod (node) knows before any rank exists.
struct NodeEnv {
  std::string master_addr;
  int master_port = 0;
  int store_port = 0;      // MASTER_PORT + 1 when a torchrun agent holds MASTER_PORT; 0: none
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 0;  // 0: unset (the launcher's flag decides)
  std::string nproc_hint;  // torchrun's "auto"/"gpu"/"cpu" when that was the value
  int world_size = 0;      // WORLD_SIZE as the pod got it; 0: unset
  std::string job_id;      // HYPERTRAIN_JOB_NAME, else "default"
  int restart_attempt = 0; // RESTART_ATTEMPT, else 0

  // Where rank 0 serves the rendezvous store.
  int StorePort() const { return store_port != 0 ? store_port : master_port; }
};

// What one rank knows: NodeEnv plus its place in the world.
struct RankEnv {
  NodeEnv node;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
};

// Parses NodeEnv: MASTER_ADDR|PET_MASTER_ADDR, MASTER_PORT|PET_MASTER_PORT
// (default 29500), NNODES|PET_NNODES (default 1; "N" or "N:N", an elastic
// range min != max is rejected), NODE_RANK|PET_NODE_RANK (default 0),
// NPROC_PER_NODE|PET_NPROC_PER_NODE (optional; torchrun's "auto", "gpu" and
// "cpu" count as unset), WORLD_SIZE (optional), HYPERTRAIN_JOB_NAME,
// RESTART_ATTEMPT. A variable and its alias that disagree are an error.
// A rank started by torchrun or hyperpodrun (LOCAL_RANK, GROUP_RANK and
// GROUP_WORLD_SIZE set) takes its node rank and count from GROUP_RANK and
// GROUP_WORLD_SIZE; with TORCHELASTIC_USE_AGENT_STORE=True the agent's store
// holds MASTER_PORT, so store_port is MASTER_PORT + 1.
// A Kubeflow PyTorchJob pod runs unchanged: without the node variables above
// and without LOCAL_RANK (so not a rank's env), its WORLD_SIZE (the number of
// pods) and RANK (the pod's index) give NNODES and NODE_RANK.
StatusOr<NodeEnv> ParseNodeEnv(const EnvLookup& env);

// The ranks a pod's launcher starts: `flag` (--nproc-per-node; 0 when absent),
// else NPROC_PER_NODE. InvalidArgument when neither is set, or when the pod's
// WORLD_SIZE (the operator's nodes x nprocPerNode) is not NNODES x that number:
// the job would train a world other than the one it asked for. A WORLD_SIZE
// equal to NNODES is a pod count (Kubeflow PyTorchJob's) and not checked.
StatusOr<int> LocalWorldSize(const NodeEnv& node, int flag);

// Parses RankEnv: NodeEnv plus WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE
// (all required, validated for consistency: WORLD_SIZE = NNODES *
// LOCAL_WORLD_SIZE, RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK).
// Without any of them (a plain single-process run) returns world size 1
// unless require_rank_vars is set.
StatusOr<RankEnv> ParseRankEnv(const EnvLookup& env, bool require_rank_vars = false);

// Strict integer parse with a message naming the variable.
StatusOr<int> ParseIntVar(const std::string& name, const std::string& value, int min, int max);

}  // namespace hypertrain::launch
