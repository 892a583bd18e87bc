#pragma once
// Leader election on a coordination.k8s.io/v1 Lease (client-go semantics):
//  - a candidate takes the Lease when it does not exist, names no holder, or
//    its record (holder + renewTime) has not changed for leaseDurationSeconds
//    as observed on THIS process's monotonic clock (no cross-node clock trust);
//  - every write is an update carrying the read resourceVersion, so two
//    candidates can never both win the same round (409 → lost the race);
//  - the leader renews every retry_period; if it cannot renew within
//    renew_deadline it stops leading (on_stopped_leading) before the lease
//    can expire for others (renew_deadline < lease_duration is enforced);
//  - on cancel a leader releases the Lease (empty holder) when release_on_cancel;
//  - holder changes, gaining and losing leadership and API errors (each
//    distinct one once) are logged with spdlog.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "kube/cancel.h"
#include "kube/resources.h"

namespace kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per candidate (e.g. pod name)
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_cancel = true;
};

struct LeaderCallbacks {
  // Runs on its own thread while leading; `stop` fires when leadership is lost or on cancel.
  std::function<void(CancelToken* stop)> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  static StatusOr<std::unique_ptr<LeaderElector>> Create(std::shared_ptr<RestClient> client,
                                                         LeaderElectionConfig config,
                                                         LeaderCallbacks callbacks);
  // Campaigns until leadership is won, leads until it is lost or `cancel`
  // fires, then returns (callers usually exit the process to restart clean).
  void Run(CancelToken* cancel);
  // One acquire-or-renew round: true if this candidate holds the lease afterwards.
  StatusOr<bool> TryAcquireOrRenew();
  // Gives the lease up if held (empty holderIdentity).
  Status Release();
  bool IsLeader() const { return leader_.load(); }
  std::string ObservedHolder() const;

 private:
  LeaderElector(std::shared_ptr<RestClient> client, LeaderElectionConfig c, LeaderCallbacks cb);
  ResourceClient leases_;
  LeaderElectionConfig cfg_;
  LeaderCallbacks cb_;
  std::atomic<bool> leader_{false};
  mutable std::mutex mu_;
  std::string observed_record_;  // holder + "|" + renewTime
  std::string observed_holder_;
  std::chrono::steady_clock::time_point observed_at_{};
};

}  // namespace kube
