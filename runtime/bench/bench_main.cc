// The //runtime/bench:bench binary (also `hypertrain bench`).
#include "core/log.h"
#include "runtime/bench/bench.h"

int main(int argc, char** argv) {
  hypertrain::log::Init(hypertrain::log::Format::kText, spdlog::level::info);
  return hypertrain::bench::BenchMain(argc, argv);
}
