#pragma once
// DistContext: everything one rank needs to take part in a job: the
// rendezvous store (served by rank 0), the collective watchdog and the world,
// shard and replica process groups of its sharding strategy.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "contract/exit_codes.h"
#include "runtime/parallel/collectives.h"
#include "runtime/launch/env.h"
#include "runtime/parallel/gloo_group.h"
#include "runtime/parallel/groups.h"
#include "runtime/launch/tcp_store.h"
#include "runtime/parallel/watchdog.h"

namespace hypertrain::parallel {

// NCCL communicator knobs of one group kind (config distributed.nccl.<kind>.*).
struct NcclTuning {
  int max_ctas = 0;  // ncclConfig_t.maxCTAs (SMs a collective may take); 0 = NCCL's default
  bool low_priority = false;  // the communication stream's priority (default high)
};

struct DistOptions {
  ShardingStrategy strategy = ShardingStrategy::kHybridShard;
  int shard_degree = 0;  // 0 = strategy default
  std::chrono::milliseconds collective_timeout{std::chrono::minutes(10)};
  // The whole start-up, from Create() on: connecting to the store (workers
  // may start long before the master), the rendezvous barrier of all ranks,
  // and connecting every process group. Past it Create() fails with
  // Unavailable (exit 200) naming the node ranks / ranks that never joined.
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
  int hang_exit_code = contract::kExitCollectiveTimeout;
  CollectiveWatchdog::HangHandler on_hang;   // empty: log + _exit(hang_exit_code)
  GlooOptions gloo;
  // By group kind: the group name without digits ("shard0" -> shard).
  NcclTuning nccl_shard, nccl_replica, nccl_world;
};

// Makes the process group `name` of `ranks` (world ranks, group-rank order).
using GroupFactory = std::function<StatusOr<std::unique_ptr<ProcessGroup>>(
    const std::string& name, const std::vector<int>& ranks)>;

class DistContext {
 public:
  // Gloo on CPU.
  static StatusOr<std::unique_ptr<DistContext>> CreateGloo(const launch::RankEnv& env,
                                                           const DistOptions& options);
  // Any backend: `make_factory` is called once the store and watchdog exist.
  static StatusOr<std::unique_ptr<DistContext>> Create(
      const launch::RankEnv& env, const DistOptions& options,
      const std::function<StatusOr<GroupFactory>(DistContext&)>& make_factory);
  ~DistContext();

  const launch::RankEnv& env() const { return env_; }
  const GroupLayout& layout() const { return layout_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  launch::TcpStoreClient& store() { return *client_; }
  // What is left of the start-up deadline (rendezvous_timeout from Create).
  std::chrono::milliseconds StartupTimeLeft() const;
  std::chrono::steady_clock::time_point startup_deadline() const { return startup_deadline_; }
  CollectiveWatchdog& watchdog() { return *watchdog_; }
  ProcessGroup& world() { return *world_; }
  ProcessGroup& shard() { return *shard_; }
  ProcessGroup& replica() { return *replica_; }
  // Every group's collectives on `recorder` (ProcessGroup::SetTrace).
  void SetTrace(trace::Recorder* recorder) {
    for (ProcessGroup* g : {world_.get(), shard_.get(), replica_.get()}) g->SetTrace(recorder);
  }
  void FlushTrace() {
    for (ProcessGroup* g : {world_.get(), shard_.get(), replica_.get()}) g->FlushTrace();
  }

 private:
  DistContext() = default;
  launch::RankEnv env_;
  GroupLayout layout_;
  std::chrono::steady_clock::time_point startup_deadline_;
  std::unique_ptr<launch::TcpStoreServer> server_;
  std::unique_ptr<launch::TcpStoreClient> client_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;
  std::shared_ptr<gloo::transport::Device> gloo_device_;
  std::unique_ptr<ProcessGroup> world_, shard_, replica_;
};

// Rank 0 serves the store on all interfaces at MASTER_PORT; every rank then
// connects to MASTER_ADDR:MASTER_PORT (rank 0 through loopback) with the job
// id and restart attempt as the store identity, announces itself and waits
// until every rank has: past `deadline` an Unavailable names the node ranks
// and ranks that never joined and the store's address.
Status JoinRendezvous(const launch::RankEnv& env, std::chrono::steady_clock::time_point deadline,
                      std::unique_ptr<launch::TcpStoreServer>* server,
                      std::unique_ptr<launch::TcpStoreClient>* client);

}  // namespace hypertrain::parallel
