#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "contract/env.h"
#include "runtime/cmd/assemble.h"
#include "runtime/cmd/commands.h"
#include "runtime/config/config.h"
#include "runtime/train/exit_codes.h"
#include "runtime/train/termination.h"

namespace hypertrain::cmd {
namespace {

constexpr char kTrainUsage[] =
    "usage: hypertrain train [--config job.yaml] [--set key.path=value ...] [--log-format=text|json]\n"
    "                        [--log-level=LEVEL]\n"
    "  Trains per the YAML (HyperPod recipe layout; see docs/TRAINER.md); without\n"
    "  --config, the file named by $HYPERTRAIN_CONFIG. $HYPERTRAIN_CHECKPOINT_DIR,\n"
    "  when set, replaces exp_manager.checkpoint_dir.\n"
    "  --set overrides one key (repeatable), e.g. --set model.optim.lr=1e-3\n";

constexpr char kConfigUsage[] =
    "usage: hypertrain config [--config job.yaml] [--set key.path=value ...]\n"
    "  Prints the resolved, typed config `hypertrain train` would run with the same\n"
    "  arguments and environment (interpolations resolved, HT_* overrides applied,\n"
    "  defaults filled in), then exits; exit 2 on a config error.\n";

// Matches "--name value" or "--name=value" at argv[*i]; advances *i.
bool Flag(int argc, char** argv, int* i, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(argv[*i], name, n) != 0) return false;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return true;
  }
  if (argv[*i][n] != '\0' || *i + 1 >= argc) return false;
  *value = argv[++*i];
  return true;
}

// A command-line error: logged, then the usage on stderr; exit 2.
int UsageError(const std::string& message, const char* usage) {
  spdlog::error("{}", message);
  std::fputs(usage, stderr);
  return train::kExitConfigError;
}

// --config/--set (and --help) of train and config; kExitOk with *done set
// after --help, kExitConfigError after a usage error.
int ParseConfigFlags(int argc, char** argv, const char* usage, std::string* config_path,
                     std::vector<std::string>* sets, bool* done) {
  *done = false;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(usage, stdout);
      *done = true;
      return train::kExitOk;
    } else if (Flag(argc, argv, &i, "--config", &v)) {
      *config_path = v;
    } else if (Flag(argc, argv, &i, "--set", &v)) {
      sets->push_back(v);
    } else {
      *done = true;
      return UsageError(fmt::format("hypertrain {}: unexpected argument '{}'", argv[0], argv[i]), usage);
    }
  }
  return train::kExitOk;
}

// The config of this run (contract/env.h: in a TrainingJob pod the path and
// the checkpoint dir come from the environment; --config and --set win; HT_*
// variables override their keys). Logs and returns the exit code on error.
std::optional<config::TrainConfig> LoadRunConfig(const char* command, std::string config_path,
                                                 const std::vector<std::string>& sets, const char* usage,
                                                 int* exit_code) {
  const config::EnvLookup env = [](const char* n) -> const char* { return std::getenv(n); };
  auto source = config::ResolveRunConfig(config_path, sets, env);
  if (!source.ok()) {
    *exit_code = UsageError(fmt::format("hypertrain {}: {}", command, source.status().message()), usage);
    return std::nullopt;
  }
  auto config = config::LoadTrainConfig(source->path, source->overrides, env);
  if (!config.ok()) {
    spdlog::error("config error: {}", config.status().message());
    *exit_code = train::kExitConfigError;
    return std::nullopt;
  }
  if (!config->unknown_keys.empty()) {
    spdlog::warn("{}: unknown keys (ignored: hypertrain.unknown_keys is warn): {}", source->path,
                 fmt::join(config->unknown_keys, ", "));
  }
  return std::move(*config);
}

}  // namespace

int TrainMain(int argc, char** argv, const LogFlags&) {
  std::string config_path;
  std::vector<std::string> sets;
  bool done;
  int code = ParseConfigFlags(argc, argv, kTrainUsage, &config_path, &sets, &done);
  if (done) return code;
  std::optional<config::TrainConfig> config = LoadRunConfig("train", config_path, sets, kTrainUsage, &code);
  if (!config) return code;
  const bool logging_rank = [] {
    const char* r = std::getenv(contract::env::kRank);
    return r == nullptr || std::strcmp(r, "0") == 0;
  }();
  if (logging_rank) {
    for (const std::string& note : config->notes) spdlog::info("config: {}", note);
    spdlog::info("resolved config (hypertrain config prints the same):\n{}", config::DescribeConfig(*config));
  }
  // SIGTERM/SIGINT: finish the step, save if it fits, exit 128+signal
  // (termination.h). Taken before any thread exists, so all inherit the mask.
  auto grace = train::Termination::GraceFromEnv(launch::ProcessEnv());
  if (!grace.ok()) {
    spdlog::error("config error: {}", grace.status().message());
    return train::kExitConfigError;
  }
  train::Termination termination(*grace);
  if (Status s = termination.HandleSignals(); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return train::kExitInternal;
  }
  auto summary = RunTrainJob(*config, launch::ProcessEnv(), &termination);
  if (!summary.ok()) {
    code = train::ExitCodeFor(summary.status());
    spdlog::error("training failed (exit {}): {}", code, summary.status().ToString());
    return code;
  }
  if (summary->stopped_by_signal != 0) return contract::kExitSignalBase + summary->stopped_by_signal;
  return train::kExitOk;
}

int ConfigMain(int argc, char** argv, const LogFlags&) {
  std::string config_path;
  std::vector<std::string> sets;
  bool done;
  int code = ParseConfigFlags(argc, argv, kConfigUsage, &config_path, &sets, &done);
  if (done) return code;
  std::optional<config::TrainConfig> config = LoadRunConfig("config", config_path, sets, kConfigUsage, &code);
  if (!config) return code;
  for (const std::string& note : config->notes) std::printf("# %s\n", note.c_str());
  std::fputs(config::DescribeConfig(*config).c_str(), stdout);
  return train::kExitOk;
}

}  // namespace hypertrain::cmd
