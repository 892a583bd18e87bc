// Registers the CPU reference backend as "cpu" (lowest priority under
// trainer.backend: auto, so a registered GPU backend wins where it works).
#include "runtime/backends/cpu/backend.h"
#include "runtime/train/plugins.h"

namespace hypertrain::cpu {
namespace {

const bool kRegistered = train::RegisterBackend(
    "cpu", 0,
    [](const config::TrainConfig&, const model::ModelConfig& m,
       const model::BackendOptions& o) -> StatusOr<train::BackendBundle> {
      HT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> b, CpuBackend::Create(m, o));
      train::BackendBundle bundle;
      bundle.backend = std::move(b);
      return bundle;
    });

}  // namespace
}  // namespace hypertrain::cpu
