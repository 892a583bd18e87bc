#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "contract/env.h"
#include "core/env_lookup.h"
#include "core/startup_phases.h"
#include "runtime/cmd/assemble.h"
#include "runtime/cmd/commands.h"
#include "runtime/config/config.h"
#include "runtime/launch/env.h"
#include "runtime/launch/termination_log.h"
#include "contract/exit_code_for.h"
#include "runtime/train/termination.h"

namespace hypertrain::cmd {
namespace {

// A command-line error found after parsing (no config): logged; exit 2.
int UsageError(const char* command, const std::string& message) {
  spdlog::error("hypertrain {}: {} (hypertrain {} --help lists the flags)", command, message, command);
  return contract::kExitConfigError;
}

// The config of this run (contract/env.h: in a TrainingJob pod the path and
// the checkpoint dir come from the environment; --config and --set win; HT_*
// variables override their keys). Logs and returns the exit code on error.
std::optional<config::TrainConfig> LoadRunConfig(const char* command, const ConfigFlags& flags,
                                                 int* exit_code) {
  const config::EnvLookup env = ProcessEnvironment();  // the config package's override table reads it
  auto source = config::ResolveRunConfig(flags.path, flags.sets, env);
  if (!source.ok()) {
    *exit_code = UsageError(command, source.status().message());
    return std::nullopt;
  }
  auto config = config::LoadTrainConfig(source->path, source->overrides, env);
  if (!config.ok()) {
    spdlog::error("config error: {}", config.status().message());
    *exit_code = contract::kExitConfigError;
    return std::nullopt;
  }
  if (!config->unknown_keys.empty()) {
    spdlog::warn("{}: unknown keys (ignored: hypertrain.unknown_keys is warn): {}", source->path,
                 fmt::join(config->unknown_keys, ", "));
  }
  return std::move(*config);
}

int RunTrain(const ConfigFlags& flags) {
  const bool logging_rank = [] {
    const char* r = ProcessEnvironment()(contract::env::kRank);
    return r == nullptr || std::strcmp(r, "0") == 0;
  }();
  const double exec_age = startup::SecondsSinceExec();  // exec to here
  int code = contract::kExitOk;
  startup::PhaseTimer config_phase("config");
  std::optional<config::TrainConfig> config = LoadRunConfig("train", flags, &code);
  if (!config) return code;  // a config error stays the first line
  // Start-up phases (core/startup_phases.h) at info on the logging rank.
  startup::SetVerbose(logging_rank);
  startup::Record("process_start", exec_age);
  config_phase.End();
  if (logging_rank) {
    for (const std::string& note : config->notes) spdlog::info("config: {}", note);
    spdlog::info("resolved config (hypertrain config prints the same):\n{}", config::DescribeConfig(*config));
  }
  // SIGTERM/SIGINT: finish the step, save if it fits, exit 128+signal
  // (termination.h). Taken before any thread exists, so all inherit the mask.
  auto grace = train::Termination::GraceFromEnv(ProcessEnvironment());
  if (!grace.ok()) {
    spdlog::error("config error: {}", grace.status().message());
    return contract::kExitConfigError;
  }
  train::Termination termination(*grace);
  if (Status s = termination.HandleSignals(); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return contract::kExitInternal;
  }
  auto summary = RunTrainJob(*config, ProcessEnvironment(), &termination);
  if (!summary.ok()) {
    code = contract::ExitCodeFor(summary.status());
    spdlog::error("training failed (exit {}): {}", code, summary.status().ToString());
    // A failure no restart cures (config 2, data 3): its cause is the pod's
    // termination message, which the operator puts in the job's Failed
    // condition (a retryable one is a peer's follow-on as often as not).
    if (code == contract::kExitConfigError || code == contract::kExitDataError) {
      launch::WriteTerminationMessage(fmt::format("hypertrain train: exit {}: {}", code, summary.status().message()));
    }
    return code;
  }
  if (summary->stopped_by_signal != 0) return contract::kExitSignalBase + summary->stopped_by_signal;
  return contract::kExitOk;
}

int RunConfig(const ConfigFlags& flags) {
  int code = contract::kExitOk;
  std::optional<config::TrainConfig> config = LoadRunConfig("config", flags, &code);
  if (!config) return code;
  for (const std::string& note : config->notes) std::printf("# %s\n", note.c_str());
  std::fputs(config::DescribeConfig(*config).c_str(), stdout);
  return contract::kExitOk;
}

}  // namespace

void AddConfigFlags(CLI::App& app, ConfigFlags* flags) {
  app.add_option("--config", flags->path,
                 "The job's YAML (HyperPod recipe layout, docs/TRAINER.md); default: the file named by "
                 "$HYPERTRAIN_CONFIG")
      ->type_name("FILE");
  app.add_option("--set", flags->sets,
                 "Override one config key, e.g. --set model.optim.lr=1e-3 (repeatable, applied in order)")
      ->type_name("KEY.PATH=VALUE")
      ->allow_extra_args(false);
}

Command AddTrainCommand(CLI::App& hypertrain) {
  CLI::App* app = hypertrain.add_subcommand("train", "Train a model from a YAML config");
  app->footer(
      "Logs the resolved config first (hypertrain config prints the same). $HYPERTRAIN_CHECKPOINT_DIR,\n"
      "when set, replaces exp_manager.checkpoint_dir; HT_* variables override their keys.\n"
      "Exit codes: contract/exit_codes.h (2 config error, 3 data error, 143 stopped by SIGTERM).");
  auto flags = std::make_shared<ConfigFlags>();
  AddConfigFlags(*app, flags.get());
  return {app, [flags](const LogFlags&) { return RunTrain(*flags); }};
}

Command AddConfigCommand(CLI::App& hypertrain) {
  CLI::App* app = hypertrain.add_subcommand("config", "Print the resolved, typed config a train run would use");
  app->footer(
      "Prints the config `hypertrain train` would run with the same arguments and environment\n"
      "(interpolations resolved, HT_* overrides applied, defaults filled in), then exits; exit 2 on a\n"
      "config error.");
  auto flags = std::make_shared<ConfigFlags>();
  AddConfigFlags(*app, flags.get());
  return {app, [flags](const LogFlags&) { return RunConfig(*flags); }};
}

}  // namespace hypertrain::cmd
