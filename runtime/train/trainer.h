#pragma once
// The training loop (llm.c style: one readable function) and the job driver
// behind `hypertrain train`.
//
// One optimizer step:
//   ZeroGrads
//   for m in 0..A-1:  batch = loader.Next()              [NVTX "data"]
//                     hooks.BeginMicroBatch(m, m == A-1)
//                     loss_m = ForwardBackward(batch, loss_scale / A, hooks)
//                                                         [NVTX "forward_backward"]
//   hooks.FinishGradients()
//   norm = sqrt(hooks.GlobalSumSquares(sum_u GradSumSquares(u))) / loss_scale
//   non-finite norm -> skip the update, back off the loss scale (fp16)
//   else clip = min(1, grad_clip / norm); OptimizerStep(u, lr(step),
//        grad_scale = clip / loss_scale) for every unit   [NVTX "optimizer"]
// The logged loss is the mean of the micro-batch losses, averaged across
// data-parallel ranks. Every trainer.val_check_interval steps (and after the
// last) a held-out evaluation runs (validation.h) and logs val/loss.
// data-parallel ranks. With trainer.profile, the steps of its window are
// traced (runtime/trace): the same phases as host spans, the unit hooks'
// structure (TracingHooks), collectives and device work (StepTracer).
// After the step: any rank asked to stop (SIGTERM) -> every rank stops here,
// saves this step if the save fits in the grace budget on every rank, and
// returns with stopped_by_signal set.
#include <chrono>
#include <cstdint>
#include <vector>

#include "runtime/config/config.h"
#include "core/status.h"
#include "runtime/data/loader.h"
#include "runtime/model/backend.h"
#include "runtime/train/metrics.h"
#include "runtime/train/parts.h"
#include "runtime/train/validation.h"
#include "runtime/train/step_tracer.h"

namespace hypertrain::train {

struct LoopContext {
  model::Backend* backend = nullptr;
  model::UnitHooks* hooks = nullptr;
  data::DataLoader* loader = nullptr;
  int world_size = 1;                   // devices taking part (for per-device rates)
  int data_world = 1;                   // data-parallel ranks (for tokens per step)
  int data_rank = 0;                    // this rank's slice of each global batch
  MetricsWriter* metrics = nullptr;     // logging rank only; may be null
  CheckpointHooks* checkpoint = nullptr;  // may be null
  Validator* validator = nullptr;         // may be null (no validation)
  // May be null. When set, every rank must have one: after each step the
  // ranks agree (AnyAcrossRanks) whether any was asked to stop.
  Termination* termination = nullptr;
  bool log = true;                      // print step lines (logging rank)
  StepTracer* tracer = nullptr;         // trainer.profile; may be null (off)
  // Resumed from a checkpoint: the first step's recovery record (metrics,
  // logging rank) with the phases before it filled in; null otherwise.
  RecoveryMetrics* recovery = nullptr;
  std::chrono::steady_clock::time_point trainer_start{};  // for RecoveryMetrics::trainer_s
};

struct TrainSummary {
  std::vector<double> losses;  // per step run
  int64_t steps_run = 0;
  int64_t skipped_steps = 0;
  double seconds = 0;
  std::vector<ValMetrics> validations;  // in step order
  double validation_seconds = 0;
  // A stop on request (termination.h): the signal (SIGTERM when another rank
  // was asked), 0 when the run reached max_steps.
  int stopped_by_signal = 0;
  bool saved_at_stop = false;
};

// Runs steps state.step .. config.max_steps-1, updating `state`.
StatusOr<TrainSummary> RunTrainingLoop(const config::TrainConfig& config, LoopContext& ctx,
                                       TrainState& state);

// The backend options of the config (before a parallel runtime shards them).
model::BackendOptions BackendOptionsFor(const config::TrainConfig& config);

// `hypertrain train` once its parts are built (runtime/cmd AssembleTrainJob):
// restores from the checkpoint hooks, builds the data loader, prints the
// model/FLOPs summary and runs the loop. A missing part is an Internal error
// before any step. Errors carry the StatusCode that ExitCodeFor maps.
StatusOr<TrainSummary> RunTrainJob(const config::TrainConfig& config, TrainParts parts);

}  // namespace hypertrain::train
