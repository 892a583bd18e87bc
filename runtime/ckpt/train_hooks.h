#pragma once
// The trainer's CheckpointHooks (runtime/train/parts.h) backed by
// CheckpointManager; runtime/cmd's assembly creates them for every job.
//
// Options: the typed exp_manager fields of config::TrainConfig and its
// CheckpointConfig (runtime/config parses them; docs/CHECKPOINTS.md).
//
// Restore(): resumes from the newest complete checkpoint automatically
// (model, AdamW m/v, step, adam step, tokens seen, loss scaler, this rank's
// sampler), else initialises the weights from model.hf_model_name_or_path
// (do_finetune) or exp_manager.hf_init_from when set. AfterStep(): saves when
// due; exports HF weights every export_full_model.every_n_train_steps.
// Finish(): final save (save_last), waits for the asynchronous writer, the
// final HF exports (export_full_model.save_last, checkpoint.export_hf_dir).
// With sharded checkpoints off (save_top_k: 0) exports go through a
// synchronous staging save under <export_dir>/.staging.
// auto_checkpoint: the time-based interval (rank 0 decides, the others follow,
// as for every_n_minutes) starts at min_interval_s and after every save
// becomes AutoCheckpointInterval(measured stall). A failed final save is an
// error whatever checkpoint.failure_policy says (the run's last steps would be
// lost). Stop(): the final save on a stop request, without the exports.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/ckpt/host_allocator.h"
#include "runtime/ckpt/manager.h"
#include "runtime/config/config.h"
#include "core/status.h"
#include "runtime/train/parts.h"

namespace hypertrain::ckpt {

// Options from the config (exp_manager keys and the extra ones above).
StatusOr<CheckpointOptions> OptionsFromConfig(const config::TrainConfig& c);
// A hash over everything that shapes the training trajectory (TrajectoryKeys
// of resume_checks.h: model, optimizer, schedule horizon, batch, precision,
// seed), not over max_steps as such, checkpoint or logging keys.
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
  double EstimatedSaveSeconds() const override;
  LoadStats RestoreStats() const override {
    return manager_ ? LoadStats{manager_->last_load_bytes(), manager_->last_load_seconds()} : LoadStats{};
  }
  Status Stop(model::Backend& backend, const train::TrainState& state, bool save) override;
  CheckpointManager* manager() { return manager_.get(); }
  // Host memory for snapshots (null: pageable); before Restore().
  void set_snapshot_allocator(HostAllocator* allocator) { allocator_ = allocator; }

 private:
  Status EnsureManager(model::Backend& backend);
  SaveRequest MakeRequest(model::Backend& backend, const train::TrainState& state) const;
  Status SaveNow(model::Backend& backend, const train::TrainState& state);
  Status InitFromHf(model::Backend& backend);
  Status ExportFullModel(model::Backend& backend, const train::TrainState& state, const std::string& out_dir);
  void UpdateAutoInterval(bool saved);

  config::TrainConfig config_;
  CheckpointOptions options_;
  RankPlacement placement_;
  HostAllocator* allocator_;
  std::string config_hash_;
  nlohmann::json trajectory_, data_identity_;  // recorded in every save, compared at resume
  std::unique_ptr<CheckpointManager> manager_;
  std::unique_ptr<CheckpointManager> export_staging_;  // created at the first export that needs it
  // auto_checkpoint: step time (mean since the last save) and the interval.
  std::chrono::steady_clock::time_point last_step_end_{};
  double step_seconds_sum_ = 0;
  int64_t steps_timed_ = 0;
  double auto_interval_s_ = 0;
  nlohmann::json base_reference_;  // PEFT: what the checkpoints say the base is (set by Restore)
};

// auto_checkpoint's interval: the save stall may cost at most max_overhead of
// the training time (interval >= stall / max_overhead), and a crash may lose
// at most max_lost_minutes of work (interval <= that); never below
// min_interval_s. When both cannot hold, bounded lost work wins.
double AutoCheckpointInterval(double stall_s, const config::CheckpointConfig& k);

// The checkpoint hooks of rank `rank` of `world_size` from the config
// (InvalidArgument for bad exp_manager keys).
StatusOr<std::unique_ptr<TrainCheckpointHooks>> CreateTrainCheckpointHooks(const config::TrainConfig& c, int rank,
                                                                           int world_size);

}  // namespace hypertrain::ckpt
