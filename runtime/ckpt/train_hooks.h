#pragma once
// The trainer's CheckpointHooks (runtime/train/parts.h) backed by
// CheckpointManager; runtime/cmd's assembly creates them for every job.
//
// Config keys (exp_manager.*; docs/CHECKPOINTS.md):
//   checkpoint_dir, every_n_train_steps, every_n_minutes, save_top_k,
//   resume_from_checkpoint, start_fresh      (parsed by runtime/config)
//   async_save (true), hf_init_from (""),
//   checkpoint.failure_policy (stop|continue), checkpoint.save_last (true),
//   checkpoint.verify_checksums (true), checkpoint.coordinator_timeout_s (600),
//   checkpoint.export_hf_dir (""), checkpoint.export_hf_dtype (bf16|fp32)
//
// Restore(): resumes from the newest complete checkpoint automatically
// (model, AdamW m/v, step, adam step, tokens seen, loss scaler, this rank's
// sampler), else initialises the weights from exp_manager.hf_init_from when
// set. AfterStep(): saves when due. Finish(): final save, waits for the
// asynchronous writer, optional HF export (rank 0).
#include <memory>
#include <optional>
#include <string>

#include "runtime/ckpt/host_allocator.h"
#include "runtime/ckpt/manager.h"
#include "runtime/config/config.h"
#include "core/status.h"
#include "runtime/train/parts.h"

namespace hypertrain::ckpt {

// Options from the config (exp_manager keys and the extra ones above).
StatusOr<CheckpointOptions> OptionsFromConfig(const config::TrainConfig& c);
// A hash over everything that shapes the training trajectory (model, optimizer,
// batch, precision, seed), not over checkpoint or logging keys.
std::string ConfigHash(const config::TrainConfig& c);
// This rank's place in the sharding layout, as runtime/parallel lays it out.
StatusOr<RankPlacement> PlacementFor(const config::TrainConfig& c, int rank, int world_size);

// StateAccess over a model::Backend.
class BackendState final : public StateAccess {
 public:
  explicit BackendState(model::Backend& b) : b_(b) {}
  ElemRange Owned(int unit) const override;
  Status Read(int unit, int state, float* host) override;
  Status Write(int unit, int state, const float* host) override;

 private:
  model::Backend& b_;
};

class TrainCheckpointHooks final : public train::CheckpointHooks {
 public:
  // `allocator`: host memory for snapshots (pinned for a CUDA backend);
  // null means pageable memory.
  TrainCheckpointHooks(const config::TrainConfig& c, CheckpointOptions options, RankPlacement placement,
                       HostAllocator* allocator = nullptr);
  StatusOr<bool> Restore(model::Backend& backend, train::TrainState& state) override;
  Status AfterStep(model::Backend& backend, const train::TrainState& state) override;
  Status Finish(model::Backend& backend, const train::TrainState& state) override;
  CheckpointManager* manager() { return manager_.get(); }
  // Host memory for snapshots (null: pageable); before Restore().
  void set_snapshot_allocator(HostAllocator* allocator) { allocator_ = allocator; }

 private:
  Status EnsureManager(model::Backend& backend);
  Status SaveNow(model::Backend& backend, const train::TrainState& state);
  Status InitFromHf(model::Backend& backend);
  Status ExportHfIfAsked();

  config::TrainConfig config_;
  CheckpointOptions options_;
  RankPlacement placement_;
  HostAllocator* allocator_;
  std::string config_hash_;
  std::unique_ptr<CheckpointManager> manager_;
};

// The checkpoint hooks of rank `rank` of `world_size` from the config
// (InvalidArgument for bad exp_manager keys).
StatusOr<std::unique_ptr<TrainCheckpointHooks>> CreateTrainCheckpointHooks(const config::TrainConfig& c, int rank,
                                                                           int world_size);

}  // namespace hypertrain::ckpt
