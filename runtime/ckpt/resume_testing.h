#pragma once
// Test harness for stop-and-resume tests of the training job (CPU and GPU):
// registers checkpoint hooks that forward to the real ones and fail right after
// a chosen step, as a crash would, after any save of that step was started.
#include <cstdint>
#include <string>

namespace hypertrain::ckpt::testing {

// The step after which the next training job stops; -1 runs to the end.
void SetStopAfterStep(int64_t step);

// A fresh, empty directory under TEST_TMPDIR (or /tmp) named `name`.
std::string FreshTempDir(const std::string& name);

// The single-rank shard file of checkpoint `step` in experiment `exp`.
std::string ShardBytes(const std::string& exp, int64_t step);

}  // namespace hypertrain::ckpt::testing
