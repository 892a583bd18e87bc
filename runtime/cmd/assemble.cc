#include "runtime/cmd/assemble.h"

#include <spdlog/spdlog.h>

#include "runtime/backends/cpu/backend.h"
#include "runtime/ckpt/host_allocator.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/cmd/cuda_parts.h"
#include "runtime/parallel/parallel_runtime.h"

namespace hypertrain::cmd {
namespace {

StatusOr<train::BackendBundle> CreateCpuBackend(const config::TrainConfig& c,
                                                const model::BackendOptions& o) {
  HT_ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuBackend> b, cpu::CpuBackend::Create(c.model, o));
  train::BackendBundle bundle;
  bundle.backend = std::move(b);
  return bundle;
}

}  // namespace

StatusOr<train::BackendBundle> CreateBackend(const config::TrainConfig& c,
                                             const model::BackendOptions& o,
                                             const launch::EnvLookup& env,
                                             ckpt::HostAllocator** snapshot_allocator) {
  if (snapshot_allocator != nullptr) *snapshot_allocator = ckpt::PageableHostAllocator();
  if (c.backend == "cpu") return CreateCpuBackend(c, o);
  if (c.backend != "cuda" && c.backend != "auto") {
    return InvalidArgument("trainer.backend: '" + c.backend + "' is not one of auto, cpu, cuda");
  }
  if (c.backend == "auto" && !CudaBuiltIn()) return CreateCpuBackend(c, o);
  StatusOr<CudaParts> cuda = CreateCudaBackend(c, o, env);
  if (!cuda.ok()) {
    if (c.backend == "cuda" || cuda.status().code() != StatusCode::kUnavailable)
      return cuda.status();
    spdlog::info("trainer.backend: auto: {}; using the CPU backend", cuda.status().message());
    return CreateCpuBackend(c, o);
  }
  if (snapshot_allocator != nullptr) *snapshot_allocator = cuda->snapshot_allocator;
  return std::move(cuda->backend);
}

StatusOr<train::TrainParts> AssembleTrainJob(const config::TrainConfig& c,
                                             const launch::EnvLookup& env) {
  train::TrainParts parts;
  HT_ASSIGN_OR_RETURN(parts.parallel, parallel::CreateParallelRuntime(c, env, CudaProcessGroups()));
  HT_ASSIGN_OR_RETURN(const model::BackendOptions o,
                      parts.parallel->ShardOptions(c.model, train::BackendOptionsFor(c)));
  // Checkpoint options are checked before any device memory or rendezvous;
  // the snapshot allocator is known once the backend exists.
  HT_ASSIGN_OR_RETURN(
      std::unique_ptr<ckpt::TrainCheckpointHooks> checkpoint,
      ckpt::CreateTrainCheckpointHooks(c, parts.parallel->rank(), parts.parallel->world_size()));
  ckpt::HostAllocator* snapshots = nullptr;
  HT_ASSIGN_OR_RETURN(parts.backend, CreateBackend(c, o, env, &snapshots));
  checkpoint->set_snapshot_allocator(snapshots);
  parts.checkpoint = std::move(checkpoint);
  HT_ASSIGN_OR_RETURN(parts.hooks, parts.parallel->MakeHooks(*parts.backend.backend));
  return parts;
}

StatusOr<train::TrainSummary> RunTrainJob(const config::TrainConfig& c,
                                          const launch::EnvLookup& env) {
  HT_ASSIGN_OR_RETURN(train::TrainParts parts, AssembleTrainJob(c, env));
  return train::RunTrainJob(c, std::move(parts));
}

}  // namespace hypertrain::cmd
