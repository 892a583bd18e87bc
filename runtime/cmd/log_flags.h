#pragma once
// The logging flags every `hypertrain` command takes, before the command
// (`hypertrain --log-format=json train ...`) or among its own flags
// (`hypertrain train --log-level=debug ...`):
//   --log-format=text|json   (default text)
//   --log-level=trace|debug|info|warn|error|critical|off   (default info)
// `hypertrain launch` passes them on to the ranks it starts.
#include <string>
#include <vector>

#include "core/log.h"
#include "core/status.h"
#include "runtime/launch/env.h"

namespace hypertrain::cmd {

struct LogFlags {
  std::string format = "text";
  std::string level = "info";
  // As arguments for a child `hypertrain` command.
  std::vector<std::string> AsArgs() const {
    return {"--log-format=" + format, "--log-level=" + level};
  }
};

// Removes the log flags ("--log-format x" or "--log-format=x", same for
// --log-level) from args[begin..], stopping at "--" and, when
// stop_at_positional, at the first argument that is neither a flag nor the
// value of one of `value_flags` (there a launched command starts).
// InvalidArgument for a log flag without a value.
Status TakeLogFlags(std::vector<std::string>* args, size_t begin, bool stop_at_positional,
                    LogFlags* flags, const std::vector<std::string>& value_flags = {});

// Context fields of `command`'s log lines: the rank of a training rank that
// is one of several (RANK, WORLD_SIZE > 1), the node of a launcher
// (NODE_RANK or PET_NODE_RANK).
log::Fields LogContext(const std::string& command, const launch::EnvLookup& env);

}  // namespace hypertrain::cmd
