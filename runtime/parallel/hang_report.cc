#include "runtime/parallel/hang_report.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace hypertrain::parallel {
namespace {

using Clock = std::chrono::steady_clock;

std::string HangKey(int rank) { return "hang/" + std::to_string(rank); }

std::string Ranks(const std::vector<int>& r) { return fmt::format("[{}]", fmt::join(r, ", ")); }

}  // namespace

std::string RankClaimKey(int rank) { return "rendezvous/claim/" + std::to_string(rank); }

std::string ExplainHang(const HangExchange& x, const std::string& report) {
  const launch::RankEnv& env = x.env;
  std::vector<int> others;
  for (int r = 0; r < env.world_size; ++r) {
    if (r != env.rank) others.push_back(r);
  }
  launch::TcpStoreClientOptions o;
  o.connect_deadline = std::chrono::seconds(2);
  o.io_timeout = std::chrono::seconds(2);
  auto c = launch::TcpStoreClient::Connect(x.store_host, env.node.StorePort(), x.identity, o);
  if (!c.ok() || !(*c)->Set(HangKey(env.rank), report).ok()) {
    return fmt::format("the rendezvous store at {}:{} does not answer, so rank 0 (which serves it) is the likely "
                       "stopped rank; candidates: ranks {}",
                       x.store_host, env.node.StorePort(), Ranks(others));
  }
  // Poll until every other rank reported or the window is over.
  std::vector<int> silent = others;
  const auto end = Clock::now() + x.window;
  while (true) {
    std::vector<int> still;
    for (int r : silent) {
      StatusOr<bool> there = (*c)->Check(HangKey(r));
      if (!there.ok() || !*there) still.push_back(r);
    }
    silent = std::move(still);
    if (silent.empty() || Clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double window_s = x.window.count() / 1000.0;
  if (silent.empty()) {
    std::vector<std::string> each;
    for (int r : others) {
      StatusOr<std::string> v = (*c)->Get(HangKey(r), std::chrono::seconds(1));
      each.push_back(fmt::format("rank {}: {}", r, v.ok() ? *v : "?"));
    }
    return fmt::format("every rank is waiting in a collective, none stopped (mismatched collectives?): {}",
                       fmt::join(each, "; "));
  }
  std::vector<std::string> named;
  for (int r : silent) {
    StatusOr<std::string> who = (*c)->Get(RankClaimKey(r), std::chrono::seconds(1));
    named.push_back(fmt::format("rank {} ({})", r, who.ok() ? *who : "host unknown"));
  }
  return fmt::format("stopped: {} — {} did not report waiting in any collective within {:.1f}s while {} of {} "
                     "ranks did (a rank that is alive but stopped or stuck outside a collective writes nothing; a "
                     "dead one is reported by its launcher)",
                     fmt::join(named, ", "), silent.size() == 1 ? "it" : "they", window_s,
                     env.world_size - static_cast<int>(silent.size()), env.world_size);
}

std::function<void(const std::string&)> ExplainingHangHandler(HangExchange x,
                                                              std::function<void(const std::string&)> then,
                                                              int exit_code) {
  return [x = std::move(x), then = std::move(then), exit_code](const std::string& report) {
    spdlog::error("{}; asking the other ranks which one stopped", report);
    const std::string full = report + "; " + ExplainHang(x, report);
    if (then) {
      then(full);
      return;
    }
    spdlog::critical("{}; exiting with code {}", full, exit_code);
    spdlog::default_logger()->flush();
    ::_exit(exit_code);
  };
}

}  // namespace hypertrain::parallel
