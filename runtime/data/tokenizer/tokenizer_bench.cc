// Tokenizer throughput (a benchmark, not a test; docs/PERF.md):
//   tokenizer_bench --tokenizer DIR --input corpus.jsonl [--threads N] [--repeat R]
// Loads the documents ({"text": ...} per line, or plain text lines) into
// memory, then N threads encode them (documents handed out in order, no
// special tokens); prints text MB/s by the wall clock (in total and per
// thread) and per CPU-second the threads were given (the per-core figure
// that stays meaningful on a shared, loaded machine), and tokens.
#include <fmt/format.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/tokenizer/tokenizer.h"

using hypertrain::tokenizer::Tokenizer;

int main(int argc, char** argv) {
  std::string dir, input;
  int threads = 1, repeat = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--input")) input = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
  }
  if (dir.empty() || input.empty() || threads < 1 || repeat < 1) {
    std::fprintf(stderr, "usage: tokenizer_bench --tokenizer DIR --input FILE [--threads N] [--repeat R]\n");
    return 2;
  }
  auto tok = Tokenizer::FromDir(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> docs;
  size_t bytes = 0;
  std::ifstream f(input);
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line[0] == '{') docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    else docs.push_back(line + "\n");
    bytes += docs.back().size();
  }
  const double mb = bytes / 1e6;
  for (int r = 0; r < repeat; ++r) {
    std::atomic<size_t> next{0};
    std::atomic<int64_t> tokens{0};
    std::atomic<int64_t> cpu_ns{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        std::vector<int32_t> ids;
        int64_t n = 0;
        for (size_t d; (d = next.fetch_add(1)) < docs.size();) {
          ids.clear();
          if (!(*tok)->EncodeTo(docs[d], {.add_special = false}, &ids).ok()) std::abort();
          n += static_cast<int64_t>(ids.size());
        }
        tokens += n;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        cpu_ns += (c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec);
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu_s = cpu_ns.load() / 1e9;
    std::printf("%s: %.1f MB, %zu docs, %lld tokens (%.2f bytes/token), %d thread(s): %.2f s, "
                "%.2f MB/s, %.2f MB/s per thread; %.2f CPU-s, %.2f MB per CPU-second\n",
                dir.c_str(), mb, docs.size(), static_cast<long long>(tokens.load()),
                bytes / static_cast<double>(tokens.load()), threads, s, mb / s, mb / s / threads, cpu_s,
                mb / cpu_s);
  }
  return 0;
}
