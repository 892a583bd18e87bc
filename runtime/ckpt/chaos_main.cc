// The `hypertrain` command line reduced to `launch` and `train` on the CPU
// backend, for chaos_test: the same launcher (runtime/launch/launch.h), trainer
// (runtime/cmd TrainMain), HSDP runtime and checkpoint hooks as the real
// binary, without building the CUDA kernels.
#include <cstdio>
#include <cstring>

#include "runtime/cmd/commands.h"
#include "runtime/launch/launch.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "launch") == 0) return hypertrain::launch::LaunchMain(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "train") == 0) return hypertrain::cmd::TrainMain(argc - 1, argv + 1);
  std::fprintf(stderr, "usage: %s launch|train ...\n", argv[0]);
  return 2;
}
