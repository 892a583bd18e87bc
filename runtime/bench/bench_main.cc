#include "runtime/bench/bench.h"

int main(int argc, char** argv) { return hypertrain::bench::BenchMain(argc, argv); }
