#pragma once
// `hypertrain bench` / the //runtime/bench:bench binary: training throughput,
// MFU, peak memory and step-time breakdown of the CUDA backend on synthetic
// data (flags in bench.cc).
#include <functional>

#include <CLI/CLI.hpp>

namespace hypertrain::bench {

// Declares the benchmark's flags on `app`; the returned function runs it after
// a parse and returns the exit code.
std::function<int()> AddBenchFlags(CLI::App& app);

}  // namespace hypertrain::bench
