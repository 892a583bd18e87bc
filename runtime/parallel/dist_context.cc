#include "runtime/parallel/dist_context.h"

#include "runtime/parallel/hang_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

namespace hypertrain::parallel {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

// Who runs a node: its host and the launcher (the ranks' common parent).
std::string NodeClaimant() {
  return fmt::format("host {} (launcher pid {})", HostName(), ::getppid());
}

std::string NodeClaimKey(int node_rank) { return "rendezvous/node/" + std::to_string(node_rank); }

// Two launchers given the same NODE_RANK: a configuration error (exit 2), not
// worth a restart that meets the same duplicate.
Status Duplicate(const launch::RankEnv& env, const std::string& holder, const std::string& me,
                 const std::string& where) {
  return InvalidArgument(fmt::format(
      "NODE_RANK={} is claimed twice in the rendezvous {}: first by {}, now by {}: two launchers were given the "
      "same NODE_RANK (each of the {} nodes needs its own, 0..{}); this one stops (rank {})",
      env.node.node_rank, where, holder, me, env.node.nnodes, env.node.nnodes - 1, env.rank));
}

// Rank 0 could not serve the store: when a store of this very job and
// attempt already answers on the port, another launcher claimed node rank 0.
Status DuplicateNodeZero(const launch::RankEnv& env, const launch::StoreIdentity& id) {
  launch::TcpStoreClientOptions o;
  o.connect_deadline = std::chrono::seconds(2);
  o.io_timeout = std::chrono::seconds(2);
  auto c = launch::TcpStoreClient::Connect("127.0.0.1", env.node.StorePort(), id, o);
  if (!c.ok()) return Status::Ok();
  StatusOr<std::string> holder = (*c)->Get(NodeClaimKey(env.node.node_rank), std::chrono::seconds(2));
  if (!holder.ok()) return Status::Ok();
  return Duplicate(env, *holder, NodeClaimant(),
                   fmt::format("of {} (its store already runs on port {} of this host)", id.ToString(),
                               env.node.StorePort()));
}

}  // namespace

Status JoinRendezvous(const launch::RankEnv& env, Clock::time_point deadline,
                      std::unique_ptr<launch::TcpStoreServer>* server,
                      std::unique_ptr<launch::TcpStoreClient>* client) {
  const launch::StoreIdentity id{env.node.job_id, env.node.restart_attempt};
  std::string host = env.node.master_addr;
  if (env.rank == 0) {
    auto s = launch::TcpStoreServer::Start("", env.node.StorePort(), id);
    if (!s.ok()) {
      HT_RETURN_IF_ERROR(DuplicateNodeZero(env, id));
      return Unavailable("rank 0 cannot serve the rendezvous store on port " +
                         std::to_string(env.node.StorePort()) + ": " + s.status().message());
    }
    *server = std::move(*s);
    host = "127.0.0.1";
  }
  launch::TcpStoreClientOptions o;
  o.connect_deadline = Left(deadline);
  auto c = launch::TcpStoreClient::Connect(host, env.node.StorePort(), id, o);
  if (!c.ok()) {
    return Unavailable("rank " + std::to_string(env.rank) + " cannot join the rendezvous of " +
                       id.ToString() + ": " + c.status().message() +
                       " (node rank 0, which serves the store, never started or is unreachable)");
  }
  *client = std::move(*c);
  // Each rank claims its node rank before it announces itself: the ranks of
  // a second launcher with the same NODE_RANK stop here, naming both, instead
  // of joining (and corrupting) the world of the first. (A duplicate node 0
  // on another host serves a store of its own; its ranks other than 0 still
  // meet the claim at MASTER_ADDR, a 1-rank node 0 only the deadline.)
  // The first launcher's ranks all write the same claim; any other's differ.
  const std::string me = NodeClaimant();
  HT_ASSIGN_OR_RETURN(const std::string holder,
                      (*client)->CompareSet(NodeClaimKey(env.node.node_rank), "", me));
  if (holder != me) {
    return Duplicate(env, holder, me, fmt::format("at {} ({})", (*client)->address(), id.ToString()));
  }
  HT_RETURN_IF_ERROR((*client)->Set(RankClaimKey(env.rank),
                                    fmt::format("host {} pid {}, node rank {}, local rank {}", HostName(),
                                                ::getpid(), env.node.node_rank, env.local_rank)));
  // Every rank announces itself, then waits for all: a node that never
  // starts is named here, before any process group waits on it.
  const auto key = [](int r) { return "rendezvous/joined/" + std::to_string(r); };
  HT_RETURN_IF_ERROR((*client)->Set(key(env.rank), std::to_string(env.node.node_rank)));
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(key(r));
  const Status all = (*client)->Wait(keys, Left(deadline));
  if (all.ok()) return Status::Ok();
  if (all.code() != StatusCode::kDeadlineExceeded) return Unavailable("rendezvous: " + all.message());
  std::vector<int> missing;
  for (int r = 0; r < env.world_size; ++r) {
    StatusOr<bool> there = (*client)->Check(key(r));
    if (!there.ok() || !*there) missing.push_back(r);
  }
  return Unavailable(std::to_string(missing.size()) + " of " + std::to_string(env.world_size) +
                     " ranks did not join the rendezvous at " + (*client)->address() + " (" + id.ToString() +
                     ") by the start-up deadline (HT_RENDEZVOUS_TIMEOUT_S): " +
                     DescribeMissingRanks(missing, env.local_world_size) +
                     " never started or cannot reach the store");
}

std::chrono::milliseconds DistContext::StartupTimeLeft() const { return Left(startup_deadline_); }

StatusOr<std::unique_ptr<DistContext>> DistContext::Create(
    const launch::RankEnv& env, const DistOptions& options,
    const std::function<StatusOr<GroupFactory>(DistContext&)>& make_factory) {
  // A peer that exits closes its sockets; writing to one must come back as an
  // error from the collective (exit 200), not kill this rank with SIGPIPE (141).
  std::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<DistContext> d(new DistContext());
  d->env_ = env;
  d->startup_deadline_ = Clock::now() + options.rendezvous_timeout;
  HT_ASSIGN_OR_RETURN(d->layout_, ComputeGroupLayout(options.strategy, options.shard_degree,
                                                     env.world_size, env.local_world_size, env.rank));
  if (options.collective_timeout.count() <= 0) {
    return InvalidArgument("collective_timeout must be > 0");
  }
  // A hang names the stopped rank: the ranks compare notes in the store
  // (hang_report.h) before the handler ends the process.
  HangExchange x{env, env.rank == 0 ? std::string("127.0.0.1") : env.node.master_addr,
                 launch::StoreIdentity{env.node.job_id, env.node.restart_attempt},
                 std::clamp<std::chrono::milliseconds>(options.collective_timeout / 2, std::chrono::seconds(1),
                                                       std::chrono::seconds(15))};
  d->watchdog_ = std::make_unique<CollectiveWatchdog>(
      options.collective_timeout, env.rank, options.hang_exit_code,
      ExplainingHangHandler(std::move(x), options.on_hang, options.hang_exit_code));
  HT_RETURN_IF_ERROR(JoinRendezvous(env, d->startup_deadline_, &d->server_, &d->client_));
  HT_ASSIGN_OR_RETURN(GroupFactory make, make_factory(*d));
  std::vector<int> all(env.world_size);
  for (int i = 0; i < env.world_size; ++i) all[i] = i;
  const GroupLayout& g = d->layout_;
  // Every rank creates world, then its shard group, then its replica group:
  // the same order everywhere, so no rank waits on a peer that waits on it.
  HT_ASSIGN_OR_RETURN(d->world_, make("world", all));
  HT_ASSIGN_OR_RETURN(d->shard_, make("shard" + std::to_string(g.shard_group), g.shard_ranks));
  HT_ASSIGN_OR_RETURN(d->replica_, make("replica" + std::to_string(g.shard_rank), g.replica_ranks));
  return d;
}

StatusOr<std::unique_ptr<DistContext>> DistContext::CreateGloo(const launch::RankEnv& env,
                                                               const DistOptions& options) {
  return Create(env, options, [&options](DistContext& d) -> StatusOr<GroupFactory> {
    GlooOptions gopts = options.gloo;
    // Gloo's own timeout backs up the watchdog; never shorter than it.
    gopts.timeout = std::max(gopts.timeout, options.collective_timeout * 2);
    gopts.rendezvous_timeout = options.rendezvous_timeout;
    gopts.connect_deadline = d.startup_deadline();
    gopts.local_world_size = d.env().local_world_size;
    HT_ASSIGN_OR_RETURN(d.gloo_device_, CreateGlooDevice(gopts));
    DistContext* self = &d;
    return GroupFactory([self, gopts](const std::string& name,
                                      const std::vector<int>& ranks) {
      return CreateGlooGroup(name, ranks, self->env_.rank, self->client_.get(), self->gloo_device_,
                             gopts, self->watchdog_.get());
    });
  });
}

DistContext::~DistContext() {
  // Groups first (their threads use the store and watchdog), store server last.
  replica_.reset();
  shard_.reset();
  world_.reset();
  client_.reset();
  server_.reset();
}

}  // namespace hypertrain::parallel
