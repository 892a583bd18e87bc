#pragma once
// Extension points of `hypertrain train`, filled in by other components with
// static registration (link their registration library with alwayslink = 1
// into //runtime/cmd:hypertrain):
//  - Backends by name: "cpu" (runtime/backends/cpu:register) and "cuda"
//    (runtime/cmd:cuda_register).
//    trainer.backend: auto picks the highest-priority backend whose factory
//    succeeds (a CUDA factory returns Unavailable without a GPU).
//  - One ParallelRuntime factory (runtime/parallel): rank/world, the data-parallel
//    split, sharded backend options and the UnitHooks. Default: one process.
//  - One CheckpointHooks factory (checkpointing): restore at start, save after
//    steps and at the end.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "core/status.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/model/backend.h"
#include "runtime/model/unit_hooks.h"
#include "runtime/train/loss_scaler.h"

namespace hypertrain::train {

// Everything a checkpoint must hold besides the backend's per-unit state.
struct TrainState {
  int64_t step = 0;         // optimizer steps completed (skipped ones included)
  int64_t adam_step = 0;    // updates applied (AdamW bias correction)
  int64_t tokens_seen = 0;  // global
  LossScalerState scaler;
  data::SamplerState data;  // this rank's sampler at the step boundary
};

struct BackendBundle {
  std::unique_ptr<model::Backend> backend;
  // Optional: where the data loader's buffers live / who copies them to the
  // device (owned by the backend; may be null).
  data::HostAllocator* allocator = nullptr;
  data::BatchStager* stager = nullptr;
};

using BackendFactory = std::function<StatusOr<BackendBundle>(
    const config::TrainConfig&, const model::ModelConfig&, const model::BackendOptions&)>;
// Higher priority wins under trainer.backend: auto. Returns true (for use in
// a static initializer).
bool RegisterBackend(const std::string& name, int priority, BackendFactory factory);
// Registered names, highest priority first.
std::vector<std::string> RegisteredBackends();
// name "auto": try in priority order, skipping factories that fail with
// Unavailable. Otherwise InvalidArgument listing the registered names.
StatusOr<BackendBundle> CreateBackend(const std::string& name, const config::TrainConfig& c,
                                      const model::ModelConfig& m, const model::BackendOptions& o);

class ParallelRuntime {
 public:
  virtual ~ParallelRuntime() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Coordinates of this rank's slice of every global batch.
  virtual int data_rank() const { return rank(); }
  virtual int data_world() const { return world_size(); }
  // Padding and owned ranges for the backend (before it is created).
  virtual StatusOr<model::BackendOptions> ShardOptions(const model::ModelConfig& /*m*/,
                                                       model::BackendOptions base) {
    return base;
  }
  virtual StatusOr<std::unique_ptr<model::UnitHooks>> MakeHooks(model::Backend& backend) = 0;
};

// Single process: rank 0 of 1, no-op hooks.
class SingleProcessRuntime final : public ParallelRuntime {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  StatusOr<std::unique_ptr<model::UnitHooks>> MakeHooks(model::Backend&) override {
    return std::unique_ptr<model::UnitHooks>(std::make_unique<model::NoOpUnitHooks>());
  }
};

using ParallelFactory =
    std::function<StatusOr<std::unique_ptr<ParallelRuntime>>(const config::TrainConfig&)>;
bool SetParallelFactory(ParallelFactory factory);
// The registered factory's runtime, or SingleProcessRuntime when none (an
// InvalidArgument error when none is registered but WORLD_SIZE > 1).
StatusOr<std::unique_ptr<ParallelRuntime>> CreateParallelRuntime(const config::TrainConfig& c);

class CheckpointHooks {
 public:
  virtual ~CheckpointHooks() = default;
  // Before training: load the newest complete checkpoint (or the forced one)
  // into the backend and `state`; return false to start fresh. Called before
  // the data loader exists, so state.data decides where the data resumes.
  virtual StatusOr<bool> Restore(model::Backend& backend, TrainState& state) = 0;
  // After every optimizer step (decides itself whether to save).
  virtual Status AfterStep(model::Backend& backend, const TrainState& state) = 0;
  // After the last step (final save; wait for asynchronous saves).
  virtual Status Finish(model::Backend& backend, const TrainState& state) = 0;
};

using CheckpointFactory = std::function<StatusOr<std::unique_ptr<CheckpointHooks>>(
    const config::TrainConfig&, ParallelRuntime&)>;
bool SetCheckpointFactory(CheckpointFactory factory);
// nullptr when no factory is registered.
StatusOr<std::unique_ptr<CheckpointHooks>> CreateCheckpointHooks(const config::TrainConfig& c,
                                                                 ParallelRuntime& p);

}  // namespace hypertrain::train
