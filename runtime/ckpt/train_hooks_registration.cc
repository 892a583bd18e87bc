// Links CheckpointManager into `hypertrain train` as its CheckpointHooks.
#include "runtime/ckpt/train_hooks.h"

namespace hypertrain::ckpt {
namespace {

const bool kRegistered = train::SetCheckpointFactory(
    [](const config::TrainConfig& c,
       train::ParallelRuntime& p) -> StatusOr<std::unique_ptr<train::CheckpointHooks>> {
      HT_ASSIGN_OR_RETURN(CheckpointOptions o, OptionsFromConfig(c));
      HT_ASSIGN_OR_RETURN(RankPlacement placement, PlacementFor(c, p.rank(), p.world_size()));
      return std::unique_ptr<train::CheckpointHooks>(
          std::make_unique<TrainCheckpointHooks>(c, std::move(o), placement));
    });

}  // namespace
}  // namespace hypertrain::ckpt
