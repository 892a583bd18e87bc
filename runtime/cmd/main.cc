// hypertrain: one binary, several subcommands (dispatch table below).
//   hypertrain [--log-format=text|json] [--log-level=LEVEL] <command> [args]
//   hypertrain --help | --version   (exit 0)
// The global flags are parsed with CLI11 (core/cli.h: a bad one exits 2); each
// command parses its own arguments.
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/cli.h"
#include "core/log.h"
#include "runtime/cmd/commands.h"
#include "runtime/cmd/cuda_parts.h"
#include "runtime/cmd/log_flags.h"
#include "runtime/estimate/estimate.h"
#include "runtime/launch/launch.h"
#include "runtime/trace/merge.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::cmd {
namespace {

int BenchCommand(int argc, char** argv, const LogFlags&) { return BenchMain(argc, argv); }
int EstimateCommand(int argc, char** argv, const LogFlags&) {
  return estimate::EstimateMain(argc, argv);
}
int TraceCommand(int argc, char** argv, const LogFlags&) { return trace::TraceMain(argc, argv); }

struct Command {
  const char* name;
  int (*main)(int argc, char** argv, const LogFlags& log);  // argv[0] = the subcommand name
  const char* help;
};

const Command kCommands[] = {
    {"train", TrainMain, "train a model from a YAML config"},
    {"config", ConfigMain, "print the resolved, typed config a train run would use"},
    {"prepare", PrepareMain, "tokenize text/JSONL/HF datasets into token shards"},
    {"tokenize", TokenizeMain, "print the token ids of standard input"},
    {"detokenize", DetokenizeMain, "print the text of token ids on standard input"},
    {"launch", LaunchMain, "start one rank per GPU on this node"},
    {"bench", BenchCommand, "CUDA training throughput on synthetic data"},
    {"estimate", EstimateCommand, "parameters, FLOPs, memory, fit, speed and cost of a config"},
    {"trace", TraceCommand, "merge or check step traces (trainer.profile)"},
};

// The commands and the build, below the global flags in --help and after a usage error.
std::string CommandsText() {
  std::string out = "Commands (hypertrain <command> --help):\n";
  for (const Command& c : kCommands) out += fmt::format("  {:<10} {}\n", c.name, c.help);
  out += fmt::format("\nThis build: {}\n",
                     CudaBuiltIn() ? "CPU and CUDA backends" : "CPU backend only (CUDA not built in)");
  return out;
}

void Usage(std::FILE* f) {
  std::fprintf(f,
               "usage: hypertrain [--log-format=text|json] [--log-level=LEVEL] <command> [args]\n"
               "       hypertrain --help | --version\n\n%s",
               CommandsText().c_str());
}

const Command* Find(const std::string& name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "hypertrain: %s\n", message.c_str());
  Usage(stderr);
  return train::kExitConfigError;
}

int Main(int argc, char** argv) {
  LogFlags log_flags;
  // Global flags (core/cli.h conventions): everything up to the command name;
  // the command and its arguments are left for the command.
  CLI::App app("Distributed LLM training: one binary, several commands.\n"
               "usage: hypertrain [OPTIONS] <command> [args]   (--flag value or --flag=value)",
               "hypertrain");
  app.prefix_command();
  app.option_defaults()->always_capture_default();
  app.add_option("--log-format", log_flags.format, "text or json (one object per line); also after the command")
      ->check(cli::kLogFormat);
  app.add_option("--log-level", log_flags.level, "trace, debug, info, warn, error, critical or off")
      ->check(cli::kLogLevel);
  cli::AddVersionFlag(app);
  app.footer(CommandsText());
  if (std::optional<int> rc = cli::Parse(app, argc, argv)) return *rc;
  std::vector<std::string> args = app.remaining();
  if (args.empty()) return UsageError("no command");
  if (args[0] == "help") {
    std::printf("%s", app.help().c_str());
    return train::kExitOk;
  }
  const Command* command = Find(args[0]);
  if (command == nullptr) {
    return UsageError(std::string(args[0][0] == '-' ? "unknown flag '" : "unknown command '") +
                      args[0] + "'");
  }
  // The command's own flags (for launch, only its own: the launched
  // command's arguments start at the first non-flag).
  const bool launch = args[0] == "launch";
  if (Status s = TakeLogFlags(&args, 1, /*stop_at_positional=*/launch, &log_flags,
                              launch ? launch::LaunchValueFlags() : std::vector<std::string>{});
      !s.ok()) {
    return UsageError(s.message());
  }
  if (Status s =
          log::Init(log_flags.format, log_flags.level, LogContext(args[0], launch::ProcessEnv()));
      !s.ok()) {
    return UsageError(s.message());
  }
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  return command->main(static_cast<int>(args.size()), cargs.data(), log_flags);
}

}  // namespace
}  // namespace hypertrain::cmd

int main(int argc, char** argv) { return hypertrain::cmd::Main(argc, argv); }
