#pragma once
// The one place a training job is put together (explicit assembly: no
// registries, no static initialisers). From the config and the rendezvous
// environment it builds, in order:
//   parallel runtime  runtime/parallel (one process, or HSDP over Gloo/NCCL)
//   checkpoint hooks  runtime/ckpt, always (a job never runs without them)
//   backend           runtime/backends/cpu, or cuda (cuda_parts.h)
//   trace recorder    runtime/trace, with trainer.profile only (handed to the
//                     backend and the process groups before the hooks)
//   unit hooks        the parallel runtime's, for that backend
// and hands them to train::RunTrainJob, which only calls down into them.
#include "core/status.h"
#include "runtime/ckpt/host_allocator.h"
#include "runtime/config/config.h"
#include "runtime/launch/env.h"
#include "runtime/train/parts.h"
#include "runtime/train/trainer.h"

namespace hypertrain::cmd {

// The backend named by trainer.backend: "cpu"; "cuda" (InvalidArgument "not
// built in" in a CPU-only build; Unavailable without a device); "auto": the
// CUDA backend when it is built in and a device works, else the CPU one.
// `snapshot_allocator` (may be null) receives the host memory checkpoint
// snapshots of this backend should use (null: pageable).
StatusOr<train::BackendBundle> CreateBackend(const config::TrainConfig& c,
                                             const model::BackendOptions& o,
                                             const launch::EnvLookup& env,
                                             ckpt::HostAllocator** snapshot_allocator = nullptr);

// The config for the world this process is in. An elastic job's pods carry
// HYPERTRAIN_DESIRED_NNODES (the node count the config describes); on NNODES
// != that count the job keeps its global batch and data order by running
// grad_accumulation_steps x desired / NNODES micro-batches per step
// (contract/elastic.h), and says so. InvalidArgument (exit 2) naming the
// numbers when that does not divide or the variable is not a positive integer.
// Without the variable, or at the desired size, `c` as it is.
StatusOr<config::TrainConfig> SizeForThisWorld(const config::TrainConfig& c, const launch::EnvLookup& env);

// Every part of the job, or the first error (config errors before any
// device memory or rendezvous).
StatusOr<train::TrainParts> AssembleTrainJob(const config::TrainConfig& c,
                                             const launch::EnvLookup& env);

// AssembleTrainJob, then train::RunTrainJob: `hypertrain train`.
// `termination` (may be null) asks the job to stop early (SIGTERM).
StatusOr<train::TrainSummary> RunTrainJob(const config::TrainConfig& c,
                                          const launch::EnvLookup& env,
                                          train::Termination* termination = nullptr);

}  // namespace hypertrain::cmd
