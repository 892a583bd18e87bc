// hypertrain: one binary, several subcommands (dispatch table below).
#include <cstdio>
#include <cstring>

#include "runtime/bench/bench.h"
#include "runtime/cmd/commands.h"
#include "runtime/launch/launch.h"
#include "runtime/train/exit_codes.h"

namespace {

struct Command {
  const char* name;
  int (*main)(int argc, char** argv);  // argv[0] = the subcommand name
  const char* help;
};

// Other components add their subcommand here, one line each.
const Command kCommands[] = {
    {"train", hypertrain::cmd::TrainMain, "train a model from a YAML config"},
    {"prepare", hypertrain::cmd::PrepareMain, "tokenize text/JSONL/HF datasets into token shards"},
    {"tokenize", hypertrain::cmd::TokenizeMain, "print the token ids of standard input"},
    {"detokenize", hypertrain::cmd::DetokenizeMain, "print the text of token ids on standard input"},
    {"launch", hypertrain::launch::LaunchMain, "start one rank per GPU on this node"},
    {"bench", hypertrain::bench::BenchMain, "CUDA training throughput on synthetic data"},
};

void Usage(std::FILE* f) {
  std::fprintf(f, "usage: hypertrain <command> [args]   (hypertrain <command> --help)\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(f, "  %-10s %s\n", c.name, c.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? hypertrain::train::kExitConfigError : hypertrain::train::kExitOk;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.main(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "hypertrain: unknown command '%s'\n", argv[1]);
  Usage(stderr);
  return hypertrain::train::kExitConfigError;
}
