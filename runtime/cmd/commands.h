#pragma once
// Subcommands of the `hypertrain` binary. Each entry point gets argv with
// argv[0] = the subcommand name and returns the process exit code
// (runtime/train/exit_codes.h).
namespace hypertrain::cmd {

int TrainMain(int argc, char** argv);    // train --config X [--set k=v ...]
int PrepareMain(int argc, char** argv);  // prepare --out DIR [--tokenizer DIR] INPUT... (data_cmds.cc)
int TokenizeMain(int argc, char** argv);    // tokenize --tokenizer DIR [--no-special]
int DetokenizeMain(int argc, char** argv);  // detokenize --tokenizer DIR

}  // namespace hypertrain::cmd
