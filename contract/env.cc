#include "contract/env.h"

namespace hypertrain::contract {
namespace {

constexpr char kLauncherEnv[] = "runtime/launch ParseNodeEnv (hypertrain launch)";
constexpr char kRankEnv[] = "runtime/launch ParseRankEnv (every rank)";
constexpr char kRunConfig[] = "runtime/config ResolveRunConfig (hypertrain train, progress reporter)";
constexpr char kElasticConfig[] = "runtime/cmd SizeForThisWorld (hypertrain train: gradient accumulation on NNODES)";
constexpr char kReporter[] = "runtime/progress (node 0's launcher)";

}  // namespace

const std::vector<EnvVarSpec>& EnvVars() {
  using namespace env;
  static const std::vector<EnvVarSpec> k = {
      {kMasterAddr, SetBy::kOperator, "", kLauncherEnv},
      {kMasterPort, SetBy::kOperator, "", kLauncherEnv},
      {kNnodes, SetBy::kOperator, "", kLauncherEnv},
      {kNodeRank, SetBy::kOperator, "", kLauncherEnv},
      {kNprocPerNode, SetBy::kOperator, "", kLauncherEnv},
      {kWorldSize, SetBy::kOperator, "", "runtime/launch LocalWorldSize (checked), then every rank"},
      {kPetMasterAddr, SetBy::kOperator, kMasterAddr, kLauncherEnv},
      {kPetMasterPort, SetBy::kOperator, kMasterPort, kLauncherEnv},
      {kPetNnodes, SetBy::kOperator, kNnodes, kLauncherEnv},
      {kPetNodeRank, SetBy::kOperator, kNodeRank, kLauncherEnv},
      {kPetNprocPerNode, SetBy::kOperator, kNprocPerNode, kLauncherEnv},
      {kRestartAttempt, SetBy::kOperator, "", "runtime/launch ParseNodeEnv (store identity), runtime/ckpt"},
      {kJobName, SetBy::kOperator, "", "runtime/launch ParseNodeEnv (store identity)"},
      {kNamespace, SetBy::kOperator, "", kReporter},
      {kProgressConfigMap, SetBy::kOperator, "", kReporter},
      {kConfig, SetBy::kOperator, "", kRunConfig},
      {kCheckpointDir, SetBy::kOperator, "", kRunConfig},
      {kDesiredNnodes, SetBy::kOperatorElastic, "", kElasticConfig},
      {kResizeReason, SetBy::kOperatorElastic, "", kElasticConfig},
      {kProfile, SetBy::kOperator, "", kRunConfig},
      {kTerminationGraceS, SetBy::kOperator, "",
       "runtime/launch (SIGKILL deadline), runtime/train Termination (save budget)"},
      {kRank, SetBy::kLauncher, "", kRankEnv},
      {kLocalRank, SetBy::kLauncher, "", kRankEnv},
      {kLocalWorldSize, SetBy::kLauncher, "", kRankEnv},
      {kGroupRank, SetBy::kTorchrun, "", kRankEnv},
      {kGroupWorldSize, SetBy::kTorchrun, "", kRankEnv},
      {kTorchelasticUseAgentStore, SetBy::kTorchrun, "", "runtime/parallel JoinRendezvous (the store's port)"},
      {kFiProvider, SetBy::kOperatorDefault, "", "libfabric"},
      {kFiEfaForkSafe, SetBy::kOperatorDefault, "", "libfabric"},
      {kFiEfaUseDeviceRdma, SetBy::kOperatorDefault, "", "libfabric"},
      {kNcclSocketIfname, SetBy::kOperatorDefault, "", "NCCL"},
      {kNcclDebug, SetBy::kOperatorDefault, "", "NCCL"},
      {kMetricsPort, SetBy::kOperatorDefault, "", "runtime/cmd launch (the metrics endpoint)"},
      {kProgressIntervalS, SetBy::kUser, "", kReporter},
      {kPodNamespaceFallback, SetBy::kUser, "", kReporter},
  };
  return k;
}

const EnvVarSpec* FindEnvVar(std::string_view name) {
  for (const EnvVarSpec& v : EnvVars()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

const std::vector<std::string>& ReservedEnvNames() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const EnvVarSpec& v : EnvVars()) {
      if (v.set_by == SetBy::kOperator || v.set_by == SetBy::kOperatorElastic || v.set_by == SetBy::kLauncher) {
        names.emplace_back(v.name);
      }
    }
    return names;
  }();
  return k;
}

}  // namespace hypertrain::contract
