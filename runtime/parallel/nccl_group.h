#pragma once
// NCCL process groups (GPU, device buffers). Each group owns one
// communicator (RAII: ncclCommDestroy, or ncclCommAbort after an error) and a
// non-blocking communication stream of its own, so the shard group's
// all-gathers/reduce-scatters and the replica group's all-reduces overlap
// with compute and with each other. The unique id of a communicator is made
// by its group rank 0 and exchanged through the TCP store under
// "nccl/<group name>/id". Every collective first waits (cudaStreamWaitEvent)
// for the work queued so far on the compute stream (SetComputeStream); the
// Work it returns records an event on the communication stream: Wait() blocks
// the host on it, WaitOnStream(s) makes stream s wait without blocking.
// Mixed dtypes (fp32 data, bf16 reduce) cast on the communication stream
// into a scratch buffer owned by the group.
//
// Set NCCL_NVLS_ENABLE=0 on machines where NVLink SHARP multicast is not
// usable (docs/DISTRIBUTED.md).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/parallel/collectives.h"
#include "runtime/parallel/dist_context.h"
#include "runtime/launch/tcp_store.h"
#include "runtime/parallel/watchdog.h"

namespace hypertrain::parallel {

// The NCCL knobs of group `group_name` by its kind (the name without digits:
// shard, replica, world; DistOptions::nccl_*, from the config keys
// distributed.nccl.<kind>.{max_ctas, priority} and their HT_NCCL_<KIND>_*
// overrides); defaults for any other name.
NcclTuning NcclTuningFor(const DistOptions& options, const std::string& group_name);

StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclGroup(
    const std::string& name, const std::vector<int>& ranks, int world_rank, int cuda_device,
    launch::TcpStoreClient* store, std::chrono::milliseconds rendezvous_timeout,
    CollectiveWatchdog* watchdog, const NcclTuning& tuning = {});

// DistContext whose world/shard/replica groups are NCCL communicators on
// `cuda_device` (normally LOCAL_RANK).
StatusOr<std::unique_ptr<DistContext>> CreateNcclDistContext(const launch::RankEnv& env,
                                                             const DistOptions& options,
                                                             int cuda_device);

}  // namespace hypertrain::parallel
