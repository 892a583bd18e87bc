// `hypertrain launch`: the launcher (runtime/launch) with the progress
// reporter (runtime/progress) on node 0, and this command's log flags passed
// on to the ranks.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <string>

#include "runtime/cmd/commands.h"
#include "runtime/launch/launch.h"
#include "runtime/progress/progress_reporter.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::cmd {

int LaunchMain(int argc, char** argv, const LogFlags& log) {
  launch::LaunchConfig config;
  std::string error;
  if (!launch::ParseLaunchArgs(argc, argv, &config, &error)) {
    if (error == launch::kLaunchUsage) {
      std::printf("%s\n", launch::kLaunchUsage);
      return train::kExitOk;
    }
    spdlog::error("hypertrain launch: {}", error);
    std::fprintf(stderr, "%s\n", launch::kLaunchUsage);
    return train::kExitConfigError;
  }
  config.subcommand_prefix = log.AsArgs();
  // Null when progress reporting does not apply (not node 0, no pod).
  std::unique_ptr<launch::LaunchObserver> reporter = progress::MaybeCreateReporter(config);
  return launch::RunLauncher(config, reporter.get());
}

}  // namespace hypertrain::cmd
