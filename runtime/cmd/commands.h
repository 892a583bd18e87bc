#pragma once
// Subcommands of the `hypertrain` binary (dispatch table in main.cc). Each
// entry point gets argv with argv[0] = the subcommand name, the log flags
// already taken out (log_flags.h) and the logger set up, and returns the
// process exit code (runtime/train/exit_codes.h).
#include "runtime/cmd/log_flags.h"

namespace hypertrain::cmd {

int TrainMain(int argc, char** argv, const LogFlags& log);       // train --config X [--set k=v ...]
int ConfigMain(int argc, char** argv, const LogFlags& log);      // config --config X [--set k=v ...]
int LaunchMain(int argc, char** argv, const LogFlags& log);      // launch [--nproc-per-node N] -- train ...
// data_cmds.cc:
int PrepareMain(int argc, char** argv, const LogFlags& log);     // prepare --out DIR [--tokenizer DIR] INPUT...
int TokenizeMain(int argc, char** argv, const LogFlags& log);    // tokenize --tokenizer DIR [--no-special]
int DetokenizeMain(int argc, char** argv, const LogFlags& log);  // detokenize --tokenizer DIR

}  // namespace hypertrain::cmd
