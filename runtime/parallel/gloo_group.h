#pragma once
// Gloo process groups (CPU, host buffers) over the TCP store.
//
// Each group has one worker thread: collectives run there in issue order, so
// the calling (compute) thread overlaps them with its own work and waits on
// the returned Work. Gloo's own algorithms do the data movement: allgather
// (ring), ReduceScatterHalvingDoubling, allreduce (ring), broadcast, barrier.
// bf16 is carried as uint16 bits; its sums use a custom reduction that adds in
// fp32 and rounds each partial sum to bf16 (bf16.h).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/parallel/collectives.h"
#include "runtime/launch/tcp_store.h"
#include "runtime/parallel/watchdog.h"

namespace gloo::transport {
class Device;
}

namespace hypertrain::parallel {

struct GlooOptions {
  // The address this rank's Gloo device listens on and advertises. Empty:
  // GLOO_SOCKET_IFNAME (interface) if set, else this host's name.
  std::string hostname;
  std::string iface;
  // Gloo's own per-operation timeout (should exceed the watchdog's).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // How long connecting the group may wait for its peers in the store, and
  // the start-up deadline it never waits past (when set).
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
  std::chrono::steady_clock::time_point connect_deadline{};
  // To name the node of a missing rank (rank / local_world_size).
  int local_world_size = 1;
};

// One transport device per process, shared by its groups.
StatusOr<std::shared_ptr<gloo::transport::Device>> CreateGlooDevice(const GlooOptions& options);

// Connects group `name` (unique per group instance: "shard1" etc.); `ranks`
// are the world ranks of its members in group-rank order and `world_rank`
// must be one of them. Every member must call this concurrently.
StatusOr<std::unique_ptr<ProcessGroup>> CreateGlooGroup(
    const std::string& name, const std::vector<int>& ranks, int world_rank,
    launch::TcpStoreClient* store, std::shared_ptr<gloo::transport::Device> device,
    const GlooOptions& options, CollectiveWatchdog* watchdog);

}  // namespace hypertrain::parallel
