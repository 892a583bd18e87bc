// hypertrain: one binary, several subcommands (dispatch table below).
//   hypertrain [--log-format=text|json] [--log-level=LEVEL] <command> [args]
//   hypertrain --help | --version   (exit 0)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/version.h"
#include "runtime/cmd/commands.h"
#include "runtime/cmd/cuda_parts.h"
#include "runtime/cmd/log_flags.h"
#include "runtime/launch/launch.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::cmd {
namespace {

int BenchCommand(int argc, char** argv, const LogFlags&) { return BenchMain(argc, argv); }

struct Command {
  const char* name;
  int (*main)(int argc, char** argv, const LogFlags& log);  // argv[0] = the subcommand name
  const char* help;
};

const Command kCommands[] = {
    {"train", TrainMain, "train a model from a YAML config"},
    {"prepare", PrepareMain, "tokenize text/JSONL/HF datasets into token shards"},
    {"tokenize", TokenizeMain, "print the token ids of standard input"},
    {"detokenize", DetokenizeMain, "print the text of token ids on standard input"},
    {"launch", LaunchMain, "start one rank per GPU on this node"},
    {"bench", BenchCommand, "CUDA training throughput on synthetic data"},
};

void Usage(std::FILE* f) {
  std::fprintf(f,
               "usage: hypertrain [--log-format=text|json] [--log-level=LEVEL] <command> [args]\n"
               "       hypertrain --help | --version\n"
               "       (hypertrain <command> --help)\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(f, "  %-10s %s\n", c.name, c.help);
  std::fprintf(f,
               "\nlog levels: trace, debug, info (default), warn, error, critical, off\n"
               "this build: %s\n",
               CudaBuiltIn() ? "CPU and CUDA backends" : "CPU backend only (CUDA not built in)");
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
  std::vector<std::string> args(argv + 1, argv + argc);
  LogFlags log_flags;
  // Global flags: everything up to the command name.
  if (Status s = TakeLogFlags(&args, 0, /*stop_at_positional=*/true, &log_flags); !s.ok()) {
    return UsageError(s.message());
  }
  if (args.empty()) return UsageError("no command");
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    Usage(stdout);
    return train::kExitOk;
  }
  if (args[0] == "--version") {
    std::printf("hypertrain %s\n", Version().c_str());
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
