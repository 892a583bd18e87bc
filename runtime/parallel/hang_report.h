#pragma once
// Who stopped, when a collective hangs (CollectiveWatchdog's explainer, set
// by DistContext). A rank cannot see its peers' stacks, so the ranks that
// hang compare notes in the rendezvous store: each writes "hang/<rank>" (its
// collective and step) and waits up to `window` for the others. A rank that
// is alive but stopped (SIGSTOP, stuck in compute, I/O or a driver call)
// writes nothing, so the ranks missing after the window are the candidates,
// named with the host and pid that claimed them at the rendezvous. When every
// rank reports a hang, the collectives are mismatched (each rank's is
// listed); when the store is unreachable, rank 0 (which serves it) is the
// likely one.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/launch/env.h"
#include "runtime/launch/tcp_store.h"

namespace hypertrain::parallel {

struct HangExchange {
  launch::RankEnv env;
  std::string store_host;  // as this rank reached the store
  launch::StoreIdentity identity;
  std::chrono::milliseconds window{std::chrono::seconds(10)};
};

// One sentence added to the watchdog's `report` (never fails; says what it
// could not find out).
std::string ExplainHang(const HangExchange& x, const std::string& report);

// The watchdog's hang handler: the report with ExplainHang's sentence, then
// `then` (when given) or a critical log line and _exit(exit_code).
std::function<void(const std::string&)> ExplainingHangHandler(HangExchange x,
                                                              std::function<void(const std::string&)> then,
                                                              int exit_code);

// The store key holding who `rank` is ("host H pid P, node rank N, local
// rank L"), written at the rendezvous.
std::string RankClaimKey(int rank);

}  // namespace hypertrain::parallel
