#pragma once
// Where checkpointing reports warnings (skipped checkpoints, failed saves) and
// progress. The training loop may route it into its own logger.
#include <functional>
#include <string>

namespace hypertrain::ckpt {

enum class LogLevel { kInfo, kWarning, kError };
using LogFn = std::function<void(LogLevel, const std::string&)>;

// "[ckpt] WARNING: ..." on stderr.
LogFn StderrLog();

}  // namespace hypertrain::ckpt
