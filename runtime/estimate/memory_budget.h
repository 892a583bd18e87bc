#pragma once
// The memory plan checked before a backend allocates: one rank's CPU-backend
// plan (contract/estimate.h, tested against the backend's real heap) against
// what this process may use, so that a config that cannot fit (model.shape
// 8b on the CPU, a million-sequence micro-batch) exits 2 naming the keys in
// milliseconds instead of growing to gigabytes first. The CUDA backend checks
// its own plan against the device.
#include <cstdint>
#include <string>

#include "core/status.h"
#include "runtime/config/config.h"

namespace hypertrain::estimate {

struct HostBudget {
  int64_t bytes = 0;   // 0 = unknown (no check)
  std::string source;  // what set it, for the message
};

// The least of: RLIMIT_AS less the address space already mapped, RLIMIT_DATA,
// the cgroup's memory.max and MemTotal, the last two shared by `local_ranks`
// processes.
HostBudget HostMemoryBudget(int64_t local_ranks);

// InvalidArgument naming the keys that size the larger part (the model's
// state: model.shape and its dimensions; else the activations:
// model.train_batch_size x model.max_context_width) when the plan of one of
// `nodes` x `ranks_per_node` ranks needs more than `budget`.
Status CheckCpuMemoryPlan(const config::TrainConfig& c, int64_t nodes, int64_t ranks_per_node,
                          const HostBudget& budget);

}  // namespace hypertrain::estimate
