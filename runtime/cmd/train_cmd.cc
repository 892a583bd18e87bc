#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cmd/assemble.h"
#include "runtime/cmd/commands.h"
#include "runtime/config/config.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::cmd {
namespace {

constexpr char kTrainUsage[] =
    "usage: hypertrain train [--config job.yaml] [--set key.path=value ...] [--log-format=text|json]\n"
    "                        [--log-level=LEVEL]\n"
    "  Trains per the YAML (HyperPod recipe layout; see docs/TRAINER.md); without\n"
    "  --config, the file named by $HYPERTRAIN_CONFIG. $HYPERTRAIN_CHECKPOINT_DIR,\n"
    "  when set, replaces exp_manager.checkpoint_dir.\n"
    "  --set overrides one key (repeatable), e.g. --set model.optim.lr=1e-3\n";

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

}  // namespace

int TrainMain(int argc, char** argv, const LogFlags&) {
  std::string config_path;
  std::vector<std::string> sets;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kTrainUsage, stdout);
      return train::kExitOk;
    } else if (Flag(argc, argv, &i, "--config", &v)) {
      config_path = v;
    } else if (Flag(argc, argv, &i, "--set", &v)) {
      sets.push_back(v);
    } else {
      return UsageError(fmt::format("hypertrain train: unexpected argument '{}'", argv[i]), kTrainUsage);
    }
  }
  // In a TrainingJob pod the config path and the checkpoint dir come from the
  // env (contract/env.h); --config and --set win.
  auto source = config::ResolveRunConfig(config_path, sets, [](const char* n) { return std::getenv(n); });
  if (!source.ok()) {
    return UsageError("hypertrain train: " + source.status().message(), kTrainUsage);
  }
  config_path = source->path;
  auto config = config::LoadTrainConfig(config_path, source->overrides);
  if (!config.ok()) {
    spdlog::error("config error: {}", config.status().message());
    return train::kExitConfigError;
  }
  if (!config->unknown_keys.empty()) {
    spdlog::warn("{}: unknown keys (ignored): {}", config_path,
                 fmt::join(config->unknown_keys, ", "));
  }
  auto summary = RunTrainJob(*config, launch::ProcessEnv());
  if (!summary.ok()) {
    const int code = train::ExitCodeFor(summary.status());
    spdlog::error("training failed (exit {}): {}", code, summary.status().ToString());
    return code;
  }
  return train::kExitOk;
}

}  // namespace hypertrain::cmd
