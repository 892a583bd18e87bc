// Registers the CUDA backend as "cuda" (priority 10: preferred by
// trainer.backend: auto). Without a usable device the factory returns
// Unavailable, so `auto` falls back to the CPU backend.
// Device: LOCAL_RANK (set by `hypertrain launch`), else 0.
// trainer.cuda_graphs: true captures the step as a CUDA graph (single process).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/backends/cuda/backend.h"
#include "runtime/train/plugins.h"

namespace hypertrain::cmd {
namespace {

StatusOr<train::BackendBundle> MakeCuda(const config::TrainConfig& c, const model::ModelConfig& m,
                                        const model::BackendOptions& o) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return Unavailable(err != cudaSuccess
                           ? fmt::format("no CUDA device ({})", cudaGetErrorString(err))
                           : std::string("no CUDA device"));
  }
  cuda::CudaOptions co;
  const char* local_rank = std::getenv("LOCAL_RANK");
  co.device = local_rank != nullptr ? std::atoi(local_rank) : 0;
  if (co.device < 0 || co.device >= count) {
    return InvalidArgument(fmt::format("LOCAL_RANK={} but this node has {} CUDA devices",
                                       co.device, count));
  }
  co.staging_slots = std::max(co.staging_slots, c.data.prefetch_depth + 2);
  const YAML::Node graphs = c.raw["trainer"]["cuda_graphs"];
  if (graphs.IsDefined() && !graphs.IsNull()) {
    try {
      co.cuda_graphs = graphs.as<bool>();
    } catch (const YAML::Exception&) {
      return InvalidArgument("trainer.cuda_graphs: expected true or false");
    }
  }
  HT_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b, cuda::CudaBackend::Create(m, o, co));
  const double gib = 1.0 / (1 << 30);
  std::fprintf(stderr,
               "[cuda] device %d (%s): planned %.2f GiB = state %.2f + activations %.2f + unit "
               "pool %.2f; allocated %.2f GiB in all\n",
               co.device, b->device_name().c_str(),
               (b->state_bytes() + b->activation_bytes() + b->pool_bytes()) * gib,
               b->state_bytes() * gib, b->activation_bytes() * gib, b->pool_bytes() * gib,
               b->allocated_bytes() * gib);
  train::BackendBundle bundle;
  bundle.allocator = b->host_allocator();
  bundle.stager = b->stager();
  bundle.backend = std::move(b);
  return bundle;
}

const bool kRegistered = train::RegisterBackend("cuda", 10, MakeCuda);

}  // namespace
}  // namespace hypertrain::cmd
