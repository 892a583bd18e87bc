#pragma once
// Subcommands of the `hypertrain` binary (main.cc assembles them). Each Add*
// function declares a subcommand and its flags (CLI11) on the binary's
// CLI::App; after a parse that selected it, main sets up the logger and calls
// its `run`, which returns the process exit code (contract/exit_codes.h).
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/cmd/log_flags.h"

namespace hypertrain::cmd {

struct Command {
  CLI::App* app = nullptr;                  // the subcommand, owned by the binary's app
  std::function<int(const LogFlags&)> run;  // after a successful parse
};

// The config a train/config run reads: --config FILE (else $HYPERTRAIN_CONFIG)
// and --set key.path=value, repeatable, applied in order.
struct ConfigFlags {
  std::string path;
  std::vector<std::string> sets;
};
void AddConfigFlags(CLI::App& app, ConfigFlags* flags);

// train_cmd.cc:
Command AddTrainCommand(CLI::App& hypertrain);   // train [--config X] [--set k=v ...]
Command AddConfigCommand(CLI::App& hypertrain);  // config [--config X] [--set k=v ...]
// launch_cmd.cc:
Command AddLaunchCommand(CLI::App& hypertrain);  // launch [--nproc-per-node N] -- train ...
// data_cmds.cc:
Command AddPrepareCommand(CLI::App& hypertrain);     // prepare --out DIR [--tokenizer DIR] INPUT...
Command AddTokenizeCommand(CLI::App& hypertrain);    // tokenize --tokenizer DIR [--no-special]
Command AddDetokenizeCommand(CLI::App& hypertrain);  // detokenize --tokenizer DIR

}  // namespace hypertrain::cmd
