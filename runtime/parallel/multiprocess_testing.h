#pragma once
// Test helper: runs `body(rank)` in `n` forked processes and collects their
// exit codes. Bounded: processes still running at the deadline are killed
// (SIGKILL, by PID) and reported as -1.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/launch/socket_util.h"
#include "runtime/parallel/dist_context.h"

namespace hypertrain::parallel::testing {

inline std::vector<int> RunProcesses(int n, const std::function<int(int rank)>& body,
                                     std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = body(r);
      } catch (...) {
        code = 99;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(n, -1);
  int left = n;
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (left > 0 && std::chrono::steady_clock::now() < end) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      int st = 0;
      if (::waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        pids[r] = 0;
        --left;
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < n; ++r) {
    if (pids[r] > 0) {
      ::kill(pids[r], SIGKILL);
      ::waitpid(pids[r], nullptr, 0);
    }
  }
  return codes;
}

// A port that was free a moment ago (bind 0, read, close).
inline int PickFreePort() {
  int port = 0;
  auto fd = launch::net::Listen("127.0.0.1", 0, &port);
  return fd.ok() ? port : 0;
}

// Rank `rank` of `world` processes on this host, `per_node` ranks per
// simulated node, rendezvous at 127.0.0.1:port: a Gloo DistContext with
// bounded waits (collectives 60 s, start-up 30 s).
inline StatusOr<std::unique_ptr<DistContext>> LocalGlooContext(int rank, int world, int per_node,
                                                               int port, const char* job_id,
                                                               ShardingStrategy strategy) {
  launch::RankEnv e;
  e.node.master_addr = "127.0.0.1";
  e.node.master_port = port;
  e.node.nnodes = world / per_node;
  e.node.node_rank = rank / per_node;
  e.node.job_id = job_id;
  e.world_size = world;
  e.rank = rank;
  e.local_world_size = per_node;
  e.local_rank = rank % per_node;
  DistOptions o;
  o.strategy = strategy;
  o.gloo.hostname = "127.0.0.1";
  o.collective_timeout = std::chrono::seconds(60);
  o.rendezvous_timeout = std::chrono::seconds(30);
  return DistContext::CreateGloo(e, o);
}

}  // namespace hypertrain::parallel::testing
