// cuda_parts.h for builds with the CUDA toolkit.
#include "runtime/cmd/cuda_parts.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/backends/cuda/backend.h"
#include "runtime/bench/bench.h"
#include "runtime/ckpt/cuda_host_allocator.h"
#include "runtime/parallel/nccl_group.h"

namespace hypertrain::cmd {

namespace {

// The oldest Linux driver CUDA 13.0 runs on (its release notes' table).
constexpr char kMinDriverForCuda13[] = "580.65.06";

// The kernel module's version ("550.54.15"), from /proc; "not loaded" when
// the node has no NVIDIA driver.
std::string NvidiaDriverVersion() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!f || !std::getline(f, line)) return "not loaded";
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Thu ..."
  const size_t at = line.find("Kernel Module");
  std::istringstream words(at == std::string::npos ? line : line.substr(at + 13));
  std::string version;
  words >> version;
  return version.empty() ? "of unknown version" : version;
}

}  // namespace

bool CudaBuiltIn() { return true; }

StatusOr<CudaParts> CreateCudaBackend(const config::TrainConfig& c, const model::BackendOptions& o,
                                      const launch::EnvLookup& env) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    // Unavailable: `auto` falls back to the CPU; `cuda` fails (CreateBackend).
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);  // 0 without a driver
    (void)cudaRuntimeGetVersion(&runtime);
    return Unavailable(fmt::format(
        "no usable CUDA device ({}); NVIDIA driver {}{}; this build needs CUDA {}.{}, i.e. a driver "
        ">= {} (docs/TRAINER.md \"Backends\")",
        err != cudaSuccess ? cudaGetErrorString(err) : "0 devices", NvidiaDriverVersion(),
        driver > 0 ? fmt::format(" (supports CUDA {}.{})", driver / 1000, driver % 1000 / 10)
                   : std::string(" (no CUDA driver loaded)"),
        runtime / 1000, runtime % 1000 / 10, kMinDriverForCuda13));
  }
  cuda::CudaOptions co;
  const char* local_rank = env("LOCAL_RANK");
  co.device = local_rank != nullptr ? std::atoi(local_rank) : 0;
  if (co.device < 0 || co.device >= count) {
    return InvalidArgument(
        fmt::format("LOCAL_RANK={} but this node has {} CUDA devices", co.device, count));
  }
  // Device slots are used round-robin by every loader: the training loader's
  // buffers plus, with validation, its loader's (prefetch 1 + 2).
  co.staging_slots = std::max(co.staging_slots, c.data.prefetch_depth + 2 + (c.validation.enabled() ? 3 : 0));
  co.cuda_graphs = c.cuda.cuda_graphs;
  if (!c.exp_dir.empty()) co.tune_cache_path = c.exp_dir + "/tune_cache.json";
  HT_RETURN_IF_ERROR(cuda::SetKernelOptions(c.cuda.attention_impl, c.cuda.gemm_autotune,
                                            c.cuda.cudnn_bwd_workspace_mb, &co));
  HT_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b,
                      cuda::CudaBackend::Create(c.model, o, co));
  const double gib = 1.0 / (1 << 30);
  spdlog::info(
      "CUDA device {} ({}): planned {:.2f} GiB = state {:.2f} + activations {:.2f} + unit pool "
      "{:.2f}; allocated {:.2f} GiB in all",
      co.device, b->device_name(),
      (b->state_bytes() + b->activation_bytes() + b->pool_bytes()) * gib, b->state_bytes() * gib,
      b->activation_bytes() * gib, b->pool_bytes() * gib, b->allocated_bytes() * gib);
  if (b->BaseLayout() != nullptr) {
    spdlog::info("CUDA device {}: frozen base {:.2f} GiB of the state{}", co.device,
                 b->BaseBytes() * gib,
                 b->ShardsBase() ? fmt::format(" (this rank's 1/{}; its gather slots are in the unit pool)",
                                               o.base_shard.size)
                                 : std::string());
  }
  CudaParts parts;
  parts.backend.allocator = b->host_allocator();
  parts.backend.stager = b->stager();
  parts.backend.backend = std::move(b);
  parts.snapshot_allocator = ckpt::CudaPinnedHostAllocator();
  return parts;
}

parallel::DeviceGroupsFactory CudaProcessGroups() {
  return [](const launch::RankEnv& env, const parallel::DistOptions& options) {
    return parallel::CreateNcclDistContext(env, options, env.local_rank);
  };
}

std::function<int()> AddBenchFlags(CLI::App& bench) { return bench::AddBenchFlags(bench); }

}  // namespace hypertrain::cmd
