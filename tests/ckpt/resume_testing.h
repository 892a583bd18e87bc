#pragma once
// Test harness for stop-and-resume tests of the training job (CPU and GPU):
// runs the job as `hypertrain train` assembles it, with checkpoint hooks that
// forward to the real ones and fail right after a chosen step, as a crash
// would, after any save of that step was started.
#include <cstdint>
#include <string>

#include "core/status.h"
#include "runtime/config/config.h"
#include "runtime/train/trainer.h"

namespace hypertrain::ckpt::testing {

// The job of `c` in this process (single rank); stop_after_step >= 0 ends it
// with Unavailable right after that step.
StatusOr<train::TrainSummary> RunJob(const config::TrainConfig& c, int64_t stop_after_step = -1);

// A fresh, empty directory under TEST_TMPDIR (or /tmp) named `name`.
std::string FreshTempDir(const std::string& name);

// The single-rank shard file of checkpoint `step` in experiment `exp`.
std::string ShardBytes(const std::string& exp, int64_t step);

}  // namespace hypertrain::ckpt::testing
