// cuda_parts.h for CPU-only builds: no CUDA code is linked. HT_CUDA_OFF_REASON
// (set by the BUILD file) says why this build has no CUDA.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/cmd/cuda_parts.h"
#include "contract/exit_codes.h"

#ifndef HT_CUDA_OFF_REASON
#define HT_CUDA_OFF_REASON "it was built without CUDA"
#endif

namespace hypertrain::cmd {
namespace {

std::string NotBuiltIn(const char* what) {
  return fmt::format(
      "{} is not built in: this hypertrain is a CPU-only build ({}). For a CUDA build, "
      "install the CUDA 13 toolkit, point CUDA_HOME at it (default /usr/local/cuda) and "
      "rebuild without --config=cpu: tools/setup.sh && bazel build //runtime/cmd:hypertrain "
      "(README, \"Building\")",
      what, HT_CUDA_OFF_REASON);
}

}  // namespace

bool CudaBuiltIn() { return false; }

StatusOr<CudaParts> CreateCudaBackend(const config::TrainConfig&, const model::BackendOptions&,
                                      const launch::EnvLookup&) {
  return InvalidArgument("trainer.backend: cuda: " + NotBuiltIn("the CUDA backend"));
}

parallel::DeviceGroupsFactory CudaProcessGroups() { return nullptr; }

std::function<int()> AddBenchFlags(CLI::App& bench) {
  bench.allow_extras();
  bench.footer(NotBuiltIn("The CUDA benchmark"));
  return [] {
    spdlog::error("hypertrain bench: {}", NotBuiltIn("the CUDA benchmark"));
    return contract::kExitConfigError;
  };
}

}  // namespace hypertrain::cmd
