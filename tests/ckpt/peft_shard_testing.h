#pragma once
// Test helpers for PEFT jobs on several ranks: the whole training job
// (ckpt::testing::RunJob) in forked processes of one node, the rendezvous
// store served by rank 0 (Gloo on 127.0.0.1, or NCCL with LOCAL_RANK as the
// device), and the comparison of two runs' outputs. The parent process never
// runs a job itself, so it never touches a CUDA context (none survives fork).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "runtime/config/config.h"
#include "runtime/parallel/multiprocess_testing.h"
#include "tests/ckpt/resume_testing.h"

namespace hypertrain::ckpt::testing {

inline config::TrainConfig Parse(const std::vector<std::string>& sets) {
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : config::TrainConfig{};
}

// The job of `sets` on `world` forked ranks of one node; returns rank 0's
// per-step losses (every rank must finish, or stop with Unavailable right
// after `stop_after` when >= 0).
inline std::vector<double> RunRanks(int world, const std::vector<std::string>& sets,
                                    int64_t stop_after = -1) {
  const config::TrainConfig c = Parse(sets);
  const std::string out = c.exp_dir + "/losses.txt";
  const int port = ::hypertrain::parallel::testing::PickFreePort();
  const std::vector<int> codes = ::hypertrain::parallel::testing::RunProcesses(
      world,
      [&](int rank) {
        const std::pair<const char*, std::string> env[] = {
            {"MASTER_ADDR", "127.0.0.1"},       {"MASTER_PORT", std::to_string(port)},
            {"NNODES", "1"},                    {"NODE_RANK", "0"},
            {"WORLD_SIZE", std::to_string(world)}, {"RANK", std::to_string(rank)},
            {"LOCAL_RANK", std::to_string(rank)},  {"LOCAL_WORLD_SIZE", std::to_string(world)},
            {"HYPERTRAIN_JOB_NAME", "peft-shard"}};
        if (world > 1) {  // one rank alone is a plain single-process run
          for (const auto& [k, v] : env) ::setenv(k, v.c_str(), 1);
        }
        auto r = RunJob(c, stop_after);
        if (stop_after >= 0) {
          if (r.status().code() == StatusCode::kUnavailable) return 0;
          std::fprintf(stderr, "rank %d: %s\n", rank, r.status().ToString().c_str());
          return 3;
        }
        if (!r.ok()) {
          std::fprintf(stderr, "rank %d: %s\n", rank, r.status().ToString().c_str());
          return 2;
        }
        if (rank == 0) {  // losses of every step, exactly
          std::ofstream f(out);
          for (double l : r->losses) f << fmt::format("{:a}\n", l);
        }
        return 0;
      },
      std::chrono::seconds(300));
  for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " of " << c.exp_dir;
  if (stop_after >= 0) return {};
  std::vector<double> losses;
  std::ifstream f(out);
  for (std::string line; std::getline(f, line);) losses.push_back(std::strtod(line.c_str(), nullptr));
  return losses;
}

inline std::string File(const std::string& path) {
  auto s = ReadFileToString(path);
  EXPECT_TRUE(s.ok()) << path << ": " << s.status().ToString();
  return s.ok() ? *s : std::string();
}

// Two runs trained the same adapters bit for bit: the checkpoints' adapter
// shards, the adapter export and the merged export are the same bytes.
inline void ExpectSameOutputs(const std::string& a, const std::string& b, int step = 6) {
  const std::string dir = "/checkpoints/step-" + std::to_string(step);
  for (const char* f : {"/adapter/adapter_model.safetensors", "/merged/model.safetensors"}) {
    const std::string x = File(a + f), y = File(b + f);
    EXPECT_FALSE(x.empty()) << a << f;
    EXPECT_TRUE(x == y) << a << f << " and " << b << f << " differ";
  }
  int shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(a + dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("shard-", 0) != 0) continue;
    ++shards;
    const std::string x = File(e.path().string()), y = File(b + dir + "/" + name);
    EXPECT_TRUE(x == y) << "checkpoint " << dir << "/" << name << " differs: " << a << ", " << b;
  }
  EXPECT_GT(shards, 0) << a;
}

}  // namespace hypertrain::ckpt::testing
