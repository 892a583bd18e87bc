#pragma once
// `hypertrain bench` / the //runtime/bench:bench binary: training throughput,
// MFU, peak memory and step-time breakdown of the CUDA backend on synthetic
// data (usage in bench.cc). argv[0] is the command name.
namespace hypertrain::bench {

int BenchMain(int argc, char** argv);

}  // namespace hypertrain::bench
