// The //runtime/bench:bench binary (also `hypertrain bench`).
#include <optional>

#include "core/cli.h"
#include "core/log.h"
#include "runtime/bench/bench.h"

int main(int argc, char** argv) {
  hypertrain::log::Init(hypertrain::log::Format::kText, spdlog::level::info);
  CLI::App app("CUDA training throughput on synthetic data", "bench");
  hypertrain::cli::UseHelpFormatter(app);
  app.option_defaults()->always_capture_default();
  std::function<int()> run = hypertrain::bench::AddBenchFlags(app);
  if (std::optional<int> rc = hypertrain::cli::Parse(app, argc, argv)) return *rc;
  return run();
}
