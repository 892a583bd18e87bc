#include "kube/leader_election.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "core/time.h"

namespace kube {
namespace {

// metav1.MicroTime: RFC 3339 with microseconds.
std::string MicroTimeNow() {
  return hypertrain::FormatRfc3339(std::chrono::system_clock::now(), hypertrain::TimePrecision::kMicros);
}

}  // namespace

LeaderElector::LeaderElector(std::shared_ptr<RestClient> client, LeaderElectionConfig c,
                             LeaderCallbacks cb)
    : leases_(std::move(client), resources::kLeases, c.lease_namespace),
      cfg_(std::move(c)),
      cb_(std::move(cb)) {}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(std::shared_ptr<RestClient> client,
                                                               LeaderElectionConfig c,
                                                               LeaderCallbacks cb) {
  if (c.lease_namespace.empty() || c.lease_name.empty() || c.identity.empty())
    return hypertrain::InvalidArgument(
        "leader election needs lease namespace, lease name and identity");
  if (!(c.retry_period < c.renew_deadline && c.renew_deadline < c.lease_duration))
    return hypertrain::InvalidArgument(
        "leader election needs retry_period < renew_deadline < lease_duration");
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(std::move(client), std::move(c), std::move(cb)));
}

std::string LeaderElector::ObservedHolder() const {
  std::lock_guard<std::mutex> l(mu_);
  return observed_holder_;
}

StatusOr<bool> LeaderElector::TryAcquireOrRenew() {
  const std::string now = MicroTimeNow();
  const int64_t duration_s = std::max<int64_t>(1, cfg_.lease_duration.count() / 1000);
  auto cur = leases_.Get(cfg_.lease_name);
  if (!cur.ok()) {
    if (!IsNotFound(cur.status())) return cur.status();
    Json lease = {{"metadata", {{"name", cfg_.lease_name}}},
                  {"spec",
                   {{"holderIdentity", cfg_.identity},
                    {"leaseDurationSeconds", duration_s},
                    {"acquireTime", now},
                    {"renewTime", now},
                    {"leaseTransitions", 0}}}};
    auto c = leases_.Create(lease);
    if (!c.ok()) {
      if (IsAlreadyExists(c.status())) return false;  // another candidate was faster
      return c.status();
    }
    std::lock_guard<std::mutex> l(mu_);
    observed_holder_ = cfg_.identity;
    observed_record_ = cfg_.identity + "|" + now;
    observed_at_ = std::chrono::steady_clock::now();
    return true;
  }
  Json lease = std::move(*cur);
  Json spec = lease.value("spec", Json::object());
  std::string holder = spec.value("holderIdentity", "");
  std::string record = holder + "|" + spec.value("renewTime", "");
  auto local_now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = local_now;
    }
    observed_holder_ = holder;
    int64_t their_duration = spec.value("leaseDurationSeconds", duration_s);
    bool expired = local_now - observed_at_ > std::chrono::seconds(their_duration);
    if (!holder.empty() && holder != cfg_.identity && !expired) return false;
  }
  bool transition = holder != cfg_.identity;
  lease["spec"]["holderIdentity"] = cfg_.identity;
  lease["spec"]["leaseDurationSeconds"] = duration_s;
  lease["spec"]["renewTime"] = now;
  if (transition) {
    lease["spec"]["acquireTime"] = now;
    lease["spec"]["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  auto u = leases_.Update(lease);  // resourceVersion precondition from the read
  if (!u.ok()) {
    if (IsConflict(u.status())) return false;
    return u.status();
  }
  std::lock_guard<std::mutex> l(mu_);
  observed_holder_ = cfg_.identity;
  observed_record_ = cfg_.identity + "|" + now;
  observed_at_ = local_now;
  return true;
}

Status LeaderElector::Release() {
  auto cur = leases_.Get(cfg_.lease_name);
  if (!cur.ok()) return IsNotFound(cur.status()) ? Status() : Status(cur.status());
  Json lease = std::move(*cur);
  if (lease.value("spec", Json::object()).value("holderIdentity", "") != cfg_.identity) return {};
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["renewTime"] = MicroTimeNow();
  auto u = leases_.Update(lease);
  if (!u.ok()) return u.status();
  return {};
}

void LeaderElector::Run(CancelToken* cancel) {
  const std::string lease = cfg_.lease_namespace + "/" + cfg_.lease_name;
  std::string last_reported, last_error;
  auto report = [&](const StatusOr<bool>& r) {
    std::string h = ObservedHolder();
    if (h != last_reported && !h.empty()) {
      spdlog::info("leader election: lease {} is held by {}", lease, h);
      if (cb_.on_new_leader) cb_.on_new_leader(h);
    }
    last_reported = h;
    // A failing API server would repeat the same error every retry period.
    const std::string err = r.ok() ? "" : r.status().ToString();
    if (!err.empty() && err != last_error) spdlog::warn("leader election: lease {}: {}", lease, err);
    last_error = err;
  };
  // Campaign.
  while (!cancel->cancelled()) {
    auto r = TryAcquireOrRenew();
    report(r);
    if (r.ok() && *r) break;
    cancel->SleepFor(cfg_.retry_period);
  }
  if (cancel->cancelled()) return;
  spdlog::info("leader election: {} leads (lease {})", cfg_.identity, lease);
  leader_ = true;
  CancelToken lead_stop;
  std::thread worker;
  if (cb_.on_started_leading) worker = std::thread([&] { cb_.on_started_leading(&lead_stop); });
  // Renew; give up once renewals keep failing for renew_deadline.
  auto last_renew = std::chrono::steady_clock::now();
  while (!cancel->cancelled()) {
    cancel->SleepFor(cfg_.retry_period);
    if (cancel->cancelled()) break;
    auto r = TryAcquireOrRenew();
    report(r);
    if (r.ok() && *r) {
      last_renew = std::chrono::steady_clock::now();
      continue;
    }
    if (r.ok() && !*r) {
      spdlog::warn("leader election: {} lost lease {} to {}", cfg_.identity, lease, ObservedHolder());
      break;
    }
    if (std::chrono::steady_clock::now() - last_renew > cfg_.renew_deadline) {
      spdlog::warn("leader election: {} could not renew lease {} within {} ms; stepping down",
                   cfg_.identity, lease, cfg_.renew_deadline.count());
      break;
    }
  }
  leader_ = false;
  lead_stop.Cancel();
  if (worker.joinable()) worker.join();
  if (cancel->cancelled() && cfg_.release_on_cancel) {
    if (Status s = Release(); !s.ok()) spdlog::warn("leader election: releasing lease {}: {}", lease, s.ToString());
  }
  if (cb_.on_stopped_leading) cb_.on_stopped_leading();
}

}  // namespace kube
