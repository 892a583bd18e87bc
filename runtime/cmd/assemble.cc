#include "runtime/cmd/assemble.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "contract/env.h"

#include <optional>
#include <string>

#include "contract/elastic.h"
#include "contract/env.h"

#include "core/startup_phases.h"
#include "runtime/backends/cpu/backend.h"
#include "runtime/ckpt/host_allocator.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/cmd/cuda_parts.h"
#include "runtime/cmd/preflight.h"
#include "runtime/estimate/memory_budget.h"
#include "runtime/parallel/parallel_runtime.h"

namespace hypertrain::cmd {
namespace {

// A positive integer environment variable, else 1.
int64_t EnvCount(const launch::EnvLookup& env, const char* name) {
  const char* v = env(name);
  const int64_t n = v != nullptr ? std::atoll(v) : 0;
  return n > 0 ? n : 1;
}

StatusOr<train::BackendBundle> CreateCpuBackend(const config::TrainConfig& c,
                                                const model::BackendOptions& o,
                                                const launch::EnvLookup& env) {
  // The plan against the host before anything is allocated.
  const int64_t local = EnvCount(env, contract::env::kLocalWorldSize);
  HT_RETURN_IF_ERROR(estimate::CheckCpuMemoryPlan(c, std::max<int64_t>(1, EnvCount(env, contract::env::kWorldSize) / local),
                                                  local, estimate::HostMemoryBudget(local)));
  HT_ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuBackend> b, cpu::CpuBackend::Create(c.model, o));
  train::BackendBundle bundle;
  bundle.backend = std::move(b);
  return bundle;
}

// trainer.profile.dir, else <exp_dir>/traces, one folder per attempt under the
// operator (RESTART_ATTEMPT), next to the metrics.
std::string TraceDir(const config::TrainConfig& c, const launch::EnvLookup& env) {
  if (!c.profile.dir.empty()) return c.profile.dir;
  std::string dir = c.exp_dir + "/traces";
  if (const char* attempt = env(contract::env::kRestartAttempt);
      attempt != nullptr && *attempt != '\0') {
    dir += std::string("/attempt-") + attempt;
  }
  return dir;
}

std::unique_ptr<trace::Recorder> MakeRecorder(const config::TrainConfig& c, int rank,
                                              int world_size, const launch::EnvLookup& env) {
  trace::RecorderOptions o;
  o.rank = rank;
  o.world_size = world_size;
  if (const char* node = env(contract::env::kNodeRank); node != nullptr) o.node = std::atoi(node);
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) o.host = host;
  o.dir = TraceDir(c, env);
  return std::make_unique<trace::Recorder>(o);
}

}  // namespace

StatusOr<train::BackendBundle> CreateBackend(const config::TrainConfig& c,
                                             const model::BackendOptions& o,
                                             const launch::EnvLookup& env,
                                             ckpt::HostAllocator** snapshot_allocator) {
  if (snapshot_allocator != nullptr) *snapshot_allocator = ckpt::PageableHostAllocator();
  if (c.backend == "cpu") return CreateCpuBackend(c, o, env);
  if (c.backend != "cuda" && c.backend != "auto") {
    return InvalidArgument("trainer.backend: '" + c.backend + "' is not one of auto, cpu, cuda");
  }
  if (c.backend == "auto" && !CudaBuiltIn()) return CreateCpuBackend(c, o, env);
  StatusOr<CudaParts> cuda = CreateCudaBackend(c, o, env);
  if (!cuda.ok()) {
    if (c.backend == "cuda" && cuda.status().code() == StatusCode::kUnavailable) {
      // No GPU or a driver too old: the same on every restart on this node,
      // so exit 2 (the operator fails the job with this message), not 200.
      return InvalidArgument("trainer.backend: cuda: " + cuda.status().message());
    }
    if (c.backend == "cuda" || cuda.status().code() != StatusCode::kUnavailable)
      return cuda.status();
    spdlog::info("trainer.backend: auto: {}; using the CPU backend", cuda.status().message());
    return CreateCpuBackend(c, o, env);
  }
  if (snapshot_allocator != nullptr) *snapshot_allocator = cuda->snapshot_allocator;
  return std::move(cuda->backend);
}

StatusOr<train::TrainParts> AssembleTrainJob(const config::TrainConfig& c,
                                             const launch::EnvLookup& env) {
  train::TrainParts parts;
  startup::PhaseTimer parallel_setup("parallel_setup");
  parts.assembly_start = std::chrono::steady_clock::now();
  HT_ASSIGN_OR_RETURN(parts.parallel, parallel::CreateParallelRuntime(c, env, CudaProcessGroups()));
  parts.rendezvous_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - *parts.assembly_start).count();
  HT_ASSIGN_OR_RETURN(const model::BackendOptions o,
                      parts.parallel->ShardOptions(c.model, train::BackendOptionsFor(c)));
  // Checkpoint options are checked before any device memory or rendezvous;
  // the snapshot allocator is known once the backend exists.
  HT_ASSIGN_OR_RETURN(
      std::unique_ptr<ckpt::TrainCheckpointHooks> checkpoint,
      ckpt::CreateTrainCheckpointHooks(c, parts.parallel->rank(), parts.parallel->world_size()));
  parallel_setup.End();
  ckpt::HostAllocator* snapshots = nullptr;
  startup::PhaseTimer backend_phase("backend");  // CUDA: context, weight init, plans
  HT_ASSIGN_OR_RETURN(parts.backend, CreateBackend(c, o, env, &snapshots));
  backend_phase.End();
  checkpoint->set_snapshot_allocator(snapshots);
  parts.checkpoint = std::move(checkpoint);
  // trainer.profile: one recorder per rank, on the backend and the process
  // groups before the hooks exist; nothing is made (or checked) when off.
  if (c.profile.enabled()) {
    parts.recorder = MakeRecorder(c, parts.parallel->rank(), parts.parallel->world_size(), env);
    parts.backend.backend->SetTrace(parts.recorder.get());
    parts.parallel->SetTrace(parts.recorder.get());
  }
  startup::PhaseTimer rendezvous("rendezvous");  // the process groups: NCCL or Gloo
  HT_ASSIGN_OR_RETURN(parts.hooks, parts.parallel->MakeHooks(*parts.backend.backend));
  rendezvous.End();
  return parts;
}

StatusOr<config::TrainConfig> SizeForThisWorld(const config::TrainConfig& c, const launch::EnvLookup& env) {
  const char* desired_env = env(contract::env::kDesiredNnodes);
  if (desired_env == nullptr || *desired_env == '\0') return c;
  int64_t desired = 0;
  const std::string text = desired_env;
  if (text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos ||
      (desired = std::stoll(text)) < 1) {
    return InvalidArgument(fmt::format("{}: '{}' is not a positive node count", contract::env::kDesiredNnodes, text));
  }
  HT_ASSIGN_OR_RETURN(const launch::NodeEnv node, launch::ParseNodeEnv(env));
  if (node.nnodes == desired) return c;
  std::string error;
  const std::optional<int64_t> accum =
      contract::ElasticAccumulation(c.grad_accumulation_steps, desired, node.nnodes, &error);
  if (!accum) {
    return InvalidArgument(fmt::format("elastic job on {} of {} desired nodes cannot keep its global batch: {}",
                                       node.nnodes, desired, error));
  }
  config::TrainConfig sized = c;
  sized.desired_grad_accumulation_steps = c.grad_accumulation_steps;
  sized.grad_accumulation_steps = *accum;
  const char* reason = env(contract::env::kResizeReason);
  const char* local_rank = env(contract::env::kLocalRank);
  if (node.node_rank == 0 && (local_rank == nullptr || std::string(local_rank) == "0")) {
    spdlog::info("elastic: running on {} of {} desired nodes{}{}: grad_accumulation_steps {} -> {} keeps the global "
                 "batch, the data order and the learning-rate schedule",
                 node.nnodes, desired, reason != nullptr && *reason != '\0' ? " because " : "",
                 reason != nullptr ? reason : "", c.grad_accumulation_steps, *accum);
  }
  return sized;
}

StatusOr<train::TrainSummary> RunTrainJob(const config::TrainConfig& c,
                                          const launch::EnvLookup& env,
                                          train::Termination* termination) {
  HT_ASSIGN_OR_RETURN(const config::TrainConfig sized, SizeForThisWorld(c, env));
  HT_ASSIGN_OR_RETURN(ExpDirGuard exp_dir, Preflight(sized, env));  // held until the run ends
  HT_ASSIGN_OR_RETURN(train::TrainParts parts, AssembleTrainJob(sized, env));
  parts.termination = termination;
  return train::RunTrainJob(sized, std::move(parts));
}

}  // namespace hypertrain::cmd
