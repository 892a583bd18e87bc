#pragma once
// The parts a training job is made of, as interfaces the training loop calls
// DOWN into. runtime/cmd (AssembleTrainJob) builds them from the config and
// hands them to RunTrainJob; nothing in runtime/train creates or looks up an
// implementation, so the loop never calls back up the layers.
//  - BackendBundle: the model::Backend (cpu or cuda) and its loader helpers.
//  - ParallelRuntime: rank/world, the data-parallel split, sharded backend
//    options and the UnitHooks (runtime/parallel; one process: the
//    SingleProcessRuntime below).
//  - CheckpointHooks: restore at start, save after steps and at the end
//    (runtime/ckpt).
//  - trace::Recorder: trainer.profile's per-rank recorder (runtime/trace),
//    already handed to the backend and the process groups; null when off.
#include <chrono>
#include <memory>
#include <optional>

#include "core/status.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/model/backend.h"
#include "runtime/model/unit_hooks.h"
#include "runtime/trace/recorder.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/train/termination.h"

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
  // Tracing (runtime/trace): the process groups' collectives on `recorder`,
  // from MakeHooks on (or at once when the groups exist); FlushTrace after a
  // traced step puts device-timed collectives on it. Single process: nothing.
  virtual void SetTrace(trace::Recorder* /*recorder*/) {}
  virtual void FlushTrace() {}
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

class CheckpointHooks {
 public:
  virtual ~CheckpointHooks() = default;
  // Before training: load the newest complete checkpoint (or the forced one)
  // into the backend and `state`; return false to start fresh. Called before
  // the data loader exists, so state.data decides where the data resumes.
  virtual StatusOr<bool> Restore(model::Backend& backend, TrainState& state) = 0;
  // After every optimizer step (decides itself whether to save).
  virtual Status AfterStep(model::Backend& backend, const TrainState& state) = 0;
  // After a Restore that resumed: this rank's checkpoint bytes read and the
  // seconds the read took (zeros: unknown or not resumed).
  struct LoadStats {
    int64_t bytes = 0;
    double seconds = 0;
  };
  virtual LoadStats RestoreStats() const { return {}; }
  // After the last step (final save; wait for asynchronous saves).
  virtual Status Finish(model::Backend& backend, const TrainState& state) = 0;
  // On a stop request (termination.h), after the step every rank agreed to
  // stop at: how long saving it would take, in seconds (a guess before the
  // first save), ...
  virtual double EstimatedSaveSeconds() const { return 0; }
  // ... then: save it unless `save` is false (it does not fit in the grace
  // budget on some rank) or it is saved already, and wait for every save in
  // flight. A save that fails is an error whatever the failure policy.
  virtual Status Stop(model::Backend& backend, const TrainState& state, bool save) {
    return save ? Finish(backend, state) : Status::Ok();
  }
};

// One job's parts, in the order they are built: the parallel runtime decides
// the backend's sharding, the hooks need the backend, the checkpoint hooks
// need the rank. RunTrainJob refuses a job with any part missing.
struct TrainParts {
  // First, so that it is destroyed last: the process groups' worker threads
  // and the backend record on it until they are gone.
  std::unique_ptr<trace::Recorder> recorder;  // trainer.profile; null when off
  std::unique_ptr<ParallelRuntime> parallel;
  BackendBundle backend;
  std::unique_ptr<model::UnitHooks> hooks;
  std::unique_ptr<CheckpointHooks> checkpoint;
  // Not owned; null: nothing asks this job to stop early.
  Termination* termination = nullptr;
  // When the assembly began and how long the parallel runtime's rendezvous
  // and process groups took: the recovery report's phases (RecoveryMetrics).
  std::optional<std::chrono::steady_clock::time_point> assembly_start;
  double rendezvous_seconds = 0;
};

}  // namespace hypertrain::train
