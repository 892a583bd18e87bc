#pragma once
// The logging flags every `hypertrain` command takes, before the command
// (`hypertrain --log-format=json train ...`) or among its own flags
// (`hypertrain train --log-level=debug ...`):
//   --log-format=text|json   (default text)
//   --log-level=trace|debug|info|warn|error|critical|off   (default info)
// `hypertrain launch` passes them on to the ranks it starts.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

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

// Declares --log-format and --log-level on `app` (the binary and each of its
// subcommands, all bound to the same `flags`; a bad value is a usage error).
void AddLogFlags(CLI::App& app, LogFlags* flags);

// Context fields of `command`'s log lines: the rank of a training rank that
// is one of several (RANK, WORLD_SIZE > 1), the node of a launcher
// (NODE_RANK or PET_NODE_RANK).
log::Fields LogContext(const std::string& command, const launch::EnvLookup& env);

}  // namespace hypertrain::cmd
