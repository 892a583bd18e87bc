#include "runtime/cmd/log_flags.h"

#include <cstdlib>

#include "core/cli.h"

namespace hypertrain::cmd {

void AddLogFlags(CLI::App& app, LogFlags* flags) {
  app.add_option("--log-format", flags->format, "text, or json (one object per line)")
      ->type_name("")
      ->check(cli::kLogFormat)
      ->group("Logging");
  app.add_option("--log-level", flags->level, "trace, debug, info, warn, error, critical or off")
      ->type_name("")
      ->check(cli::kLogLevel)
      ->group("Logging");
}

log::Fields LogContext(const std::string& command, const launch::EnvLookup& env) {
  auto get = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v != nullptr ? v : "";
  };
  if (command == "launch") {
    std::string node = get("NODE_RANK");
    if (node.empty()) node = get("PET_NODE_RANK");
    if (!node.empty()) return {{"node", node}};
    return {};
  }
  const std::string rank = get("RANK");
  if (!rank.empty() && std::atoi(get("WORLD_SIZE").c_str()) > 1) return {{"rank", rank}};
  return {};
}

}  // namespace hypertrain::cmd
