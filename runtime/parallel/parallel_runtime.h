#pragma once
// The trainer's ParallelRuntime (runtime/train/parts.h), built by
// runtime/cmd's assembly from the config and the rendezvous environment.
//
// From the env contract (env.h) and the config keys model.sharding_strategy,
// model.shard_degree and model.collective_timeout:
//  - world size 1 (no RANK/WORLD_SIZE, or WORLD_SIZE=1): a plain single
//    process, no store, no-op hooks;
//  - otherwise the group layout is fixed at creation (config errors surface
//    before any backend memory is allocated), the backend gets padded units
//    and this rank's owned ranges, and MakeHooks() joins the rendezvous and
//    builds Gloo groups for the "cpu" backend or, for a device backend, the
//    groups of `device_groups` (NCCL communicators on device LOCAL_RANK for
//    CUDA, passed in by CUDA builds), then returns HsdpHooks.
// The data-parallel coordinates are (world rank, world size): each rank reads
// its own 1/world of every global batch.
//
// Knobs: config.distributed (gloo_hostname, rendezvous_timeout_s,
// reduce_dtype, split_embedding_grad, replica_reduce; runtime/config maps
// their HT_* environment overrides); GLOO_SOCKET_IFNAME (Gloo's own) picks the
// interface when no hostname is given.
#include <memory>

#include "runtime/config/config.h"
#include "core/status.h"
#include "runtime/parallel/dist_context.h"
#include "runtime/launch/env.h"
#include "runtime/train/parts.h"

namespace hypertrain::parallel {

// Process groups for a backend that is not on the CPU (e.g. NCCL for CUDA).
using DeviceGroupsFactory = std::function<StatusOr<std::unique_ptr<DistContext>>(
    const launch::RankEnv& env, const DistOptions& options)>;

// InvalidArgument for a bad layout or knob, before anything is allocated.
// An empty `device_groups` makes MakeHooks fail for any backend but "cpu".
StatusOr<std::unique_ptr<train::ParallelRuntime>> CreateParallelRuntime(
    const config::TrainConfig& c, const launch::EnvLookup& env, DeviceGroupsFactory device_groups);

}  // namespace hypertrain::parallel
