#pragma once
// Every environment variable that crosses the operator–runtime boundary: what
// the operator sets on a TrainingJob pod (operator/controller/builders.cc),
// what `hypertrain launch` adds for each rank, and the few knobs a user may set
// in spec.env that the runtime reads. The rule: every variable the operator
// sets is read by the runtime (or by a library inside it), or it is not set.
// builders_contract_test fails when a pod's env names a variable not listed
// here; docs/OPERATOR.md and docs/DISTRIBUTED.md describe the same table.
//
// Runtime-internal tuning knobs (HT_REDUCE_DTYPE, HT_RENDEZVOUS_TIMEOUT_S,
// HT_ATTENTION_IMPL, ...) are not part of the contract: the operator never sets
// them, and each is documented beside the code that reads it.

#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::contract {
namespace env {

// --- Rendezvous: set by the operator on every pod, read by `hypertrain launch`
// (runtime/launch/env.h), which passes them on to every rank.

// Host of node rank 0, where rank 0 serves the rendezvous TCP store:
// "<job>-node-0.<job>.<namespace>.svc" (pod 0's hostname under the job's
// headless Service, resolvable before the pod is Ready).
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
// TCP port of the store: spec.masterPort (default 29500).
inline constexpr char kMasterPort[] = "MASTER_PORT";
// Pods (nodes) in the job: spec.nodes. The launcher also accepts torchrun's
// "N:N" and rejects an elastic range.
inline constexpr char kNnodes[] = "NNODES";
// This pod's index in [0, NNODES) (also the pod label kLabelNodeRank).
inline constexpr char kNodeRank[] = "NODE_RANK";
// Ranks per pod: spec.nprocPerNode. The launcher starts this many unless its
// --nproc-per-node flag says otherwise.
inline constexpr char kNprocPerNode[] = "NPROC_PER_NODE";
// Ranks in the job, NNODES x NPROC_PER_NODE (status.worldSize). The launcher
// refuses to start when the ranks it would start disagree with it (exit 2),
// then sets it again for every rank.
inline constexpr char kWorldSize[] = "WORLD_SIZE";
// torchrun's spellings (Kubeflow PyTorchJob/Trainer) of the five above, with
// the same values, for scripts written for them. The launcher takes either; a
// variable and its alias that disagree are a config error.
inline constexpr char kPetMasterAddr[] = "PET_MASTER_ADDR";
inline constexpr char kPetMasterPort[] = "PET_MASTER_PORT";
inline constexpr char kPetNnodes[] = "PET_NNODES";
inline constexpr char kPetNodeRank[] = "PET_NODE_RANK";
inline constexpr char kPetNprocPerNode[] = "PET_NPROC_PER_NODE";
// The gang's restart attempt, 0 first (status.restartAttempt, pod label
// kLabelRestartAttempt). With HYPERTRAIN_JOB_NAME it is the rendezvous store's
// identity, so a rank of an older attempt never joins a newer one; checkpoint
// temporaries carry it as their suffix.
inline constexpr char kRestartAttempt[] = "RESTART_ATTEMPT";

// --- Identity: set by the operator through the downward API.

// The TrainingJob's name (from the pod label kLabelJobName): the rendezvous
// store's job identity. Unset (local runs): "default".
inline constexpr char kJobName[] = "HYPERTRAIN_JOB_NAME";
// The pod's namespace: node 0's launcher writes the progress annotation
// (progress.h) on the job's progress ConfigMap there.
inline constexpr char kNamespace[] = "HYPERTRAIN_NAMESPACE";
// The job's progress ConfigMap, "<job>-progress": the only object the pods'
// ServiceAccount may change (patch, by name); node 0's launcher annotates it.
inline constexpr char kProgressConfigMap[] = "HYPERTRAIN_PROGRESS_CONFIGMAP";

// --- Trainer inputs: set by the operator, read by `hypertrain train` and by the
// launcher's progress reporter (runtime/config: ResolveRunConfig).

// The trainer config file: kConfigPath (pod.h), mounted from the job's
// ConfigMap. Used when `hypertrain train` gets no --config.
inline constexpr char kConfig[] = "HYPERTRAIN_CONFIG";
// The checkpoint directory: spec.checkpointDir, else the inline config's
// exp_manager.checkpoint_dir; set only when one is known. It replaces the
// config's exp_manager.checkpoint_dir (a --set of that key still wins), so a
// config from a ConfigMap the operator cannot read saves where the job says.
inline constexpr char kCheckpointDir[] = "HYPERTRAIN_CHECKPOINT_DIR";
// Steps to trace (format: profile.h), from the job's kAnnotationProfile (pod.h)
// when the pod was created; set only then. Becomes trainer.profile.* (a --set
// of those keys still wins).
inline constexpr char kProfile[] = "HYPERTRAIN_PROFILE";
// The pod's termination grace budget in seconds: the pod's
// terminationGracePeriodSeconds (spec.scheduling.terminationGracePeriodSeconds),
// the time between Kubernetes' SIGTERM and its SIGKILL. On SIGTERM the
// launcher gives its ranks this long before it kills them, and the ranks
// finish the current step and save only when the save fits in what is left of
// it (runtime/train/termination.h; docs/DISTRIBUTED.md "Termination"). Unset
// (local runs): 30, Kubernetes' default.
inline constexpr char kTerminationGraceS[] = "HYPERTRAIN_TERMINATION_GRACE_S";

// --- Elastic jobs (spec.elastic): set by the operator on their pods only,
// read by the trainer (runtime/cmd SizeForThisWorld), which keeps the global batch of the
// desired size on NNODES nodes (contract/elastic.h).

// The desired size, spec.nodes: the node count the trainer config's batch is
// written for. NNODES is the size of this attempt (minNodes..maxNodes).
inline constexpr char kDesiredNnodes[] = "HYPERTRAIN_DESIRED_NNODES";
// Why this attempt runs on NNODES rather than the desired size (the
// operator's words, e.g. "1 of 2 nodes fit after schedulingTimeoutSeconds=60:
// ..."); set only while the two differ. The trainer logs it.
inline constexpr char kResizeReason[] = "HYPERTRAIN_RESIZE_REASON";

// --- Per rank: set by `hypertrain launch` (with WORLD_SIZE and the node
// variables above), read by the trainer (runtime/parallel, the CUDA backend).

// Global rank: NODE_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK.
inline constexpr char kRank[] = "RANK";
// Rank within the pod; the CUDA device index.
inline constexpr char kLocalRank[] = "LOCAL_RANK";
// Ranks in this pod.
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";

// --- Per rank when `hypertrain train` runs as a torchrun worker (torchrun,
// HyperPod's hyperpodrun inside a HyperPodPyTorchJob): their names for the
// node rank and the node count, read where NODE_RANK/NNODES are unset.
inline constexpr char kGroupRank[] = "GROUP_RANK";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";
// "True" when the agent already serves a store on MASTER_PORT (torch >= 2.2):
// rank 0's hypertrain store then listens on MASTER_PORT + 1.
inline constexpr char kTorchelasticUseAgentStore[] = "TORCHELASTIC_USE_AGENT_STORE";

// --- Library defaults: the operator sets these on GPU pods unless spec.env
// names them; libfabric and NCCL read them inside the ranks.

// "efa" when the pod has EFA devices.
inline constexpr char kFiProvider[] = "FI_PROVIDER";
// "1" with EFA devices: the launcher forks the ranks.
inline constexpr char kFiEfaForkSafe[] = "FI_EFA_FORK_SAFE";
// "1" on instance families with GPUDirect RDMA over EFA (p4d, p5).
inline constexpr char kFiEfaUseDeviceRdma[] = "FI_EFA_USE_DEVICE_RDMA";
// "^lo": NCCL's bootstrap uses any interface but loopback.
inline constexpr char kNcclSocketIfname[] = "NCCL_SOCKET_IFNAME";
// "WARN".
inline constexpr char kNcclDebug[] = "NCCL_DEBUG";

// --- Observability: the operator sets it on every pod unless spec.env names
// it; read by `hypertrain launch` (its --metrics-port flag wins).

// Port of the launcher's Prometheus endpoint (/metrics: the node's step
// metrics, runtime/progress/trainer_metrics.h); "0" turns it off. The
// operator declares the same port as the container port named "metrics",
// which the chart's PodMonitor scrapes.
inline constexpr char kMetricsPort[] = "HYPERTRAIN_METRICS_PORT";
inline constexpr int kDefaultMetricsPort = 9400;

// --- Optional, set by the user (spec.env or a shell), read by the launcher.

// Seconds between node 0's progress annotations (default 10); keep it well
// below faultPolicy.hangTimeoutSeconds.
inline constexpr char kProgressIntervalS[] = "HYPERTRAIN_PROGRESS_INTERVAL_S";
// Read when HYPERTRAIN_NAMESPACE is unset (a pod the operator did not build).
inline constexpr char kPodNamespaceFallback[] = "POD_NAMESPACE";

}  // namespace env

enum class SetBy {
  kOperator,         // on every TrainingJob pod (kCheckpointDir: when known); reserved
  kOperatorDefault,  // unless spec.env names it: library tuning on GPU pods, the metrics port on every pod
  kOperatorElastic,  // on the pods of elastic jobs (kResizeReason: while resized); reserved
  kLauncher,         // by `hypertrain launch`, per rank; reserved
  kTorchrun,         // by torchrun/hyperpodrun for their workers; never by the operator
  kUser,             // optionally by the user
};

struct EnvVarSpec {
  std::string_view name;
  SetBy set_by;
  std::string_view alias_of;  // the plain name a PET_* alias stands for; "" otherwise
  std::string_view read_by;   // what reads it
};

// Every variable above, in that order.
const std::vector<EnvVarSpec>& EnvVars();
// The entry for `name`, or nullptr when the contract does not define it.
const EnvVarSpec* FindEnvVar(std::string_view name);
// Names a TrainingJob's spec.env may not use: those the operator or the
// launcher set (the CRD's CEL rule lists the same names).
const std::vector<std::string>& ReservedEnvNames();

}  // namespace hypertrain::contract
