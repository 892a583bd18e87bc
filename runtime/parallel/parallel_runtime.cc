#include "runtime/parallel/parallel_runtime.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "runtime/parallel/hsdp.h"
#include "runtime/parallel/peft_hooks.h"
#include "contract/exit_codes.h"

namespace hypertrain::parallel {

namespace {

class DistRuntime final : public train::ParallelRuntime {
 public:
  DistRuntime(launch::RankEnv env, DistOptions options, GroupLayout layout, HsdpOptions hsdp,
              DeviceGroupsFactory device_groups)
      : env_(std::move(env)),
        options_(std::move(options)),
        layout_(std::move(layout)),
        hsdp_(hsdp),
        device_groups_(std::move(device_groups)) {}

  int rank() const override { return env_.rank; }
  int world_size() const override { return env_.world_size; }
  int data_rank() const override { return layout_.dp_rank(); }
  int data_world() const override { return layout_.dp_size(); }

  StatusOr<model::BackendOptions> ShardOptions(const model::ModelConfig& m,
                                               model::BackendOptions base) override {
    if (base.peft.enabled()) {  // PEFT: whole adapters; the base sharded over the shard group
      base.base_shard = {layout_.shard_rank, layout_.shard_degree};
      return base;
    }
    return ShardedBackendOptions(m, std::move(base), layout_);
  }

  StatusOr<std::unique_ptr<model::UnitHooks>> MakeHooks(model::Backend& backend) override {
    if (backend.name() == "cpu") {
      HT_ASSIGN_OR_RETURN(ctx_, DistContext::CreateGloo(env_, options_));
    } else if (device_groups_) {
      HT_ASSIGN_OR_RETURN(ctx_, device_groups_(env_, options_));
    } else {
      return FailedPrecondition("no process groups for the " + std::string(backend.name()) +
                                " backend in this build");
    }
    spdlog::info("rank {}/{} (node {}, local {}): {}, shard group {} ({} ranks), replica group of {}, "
                 "{} groups, reduce {}",
                 env_.rank, env_.world_size, env_.node.node_rank, env_.local_rank,
                 ShardingStrategyName(layout_.strategy), layout_.shard_group, layout_.shard_degree,
                 layout_.replica_degree, ctx_->world().backend(), DTypeName(hsdp_.reduce_dtype));
    if (trace_ != nullptr) ctx_->SetTrace(trace_);
    if (backend.BaseLayout() != nullptr) {
      if (backend.ShardsBase()) {
        spdlog::info("model.peft: adapters replicated, gradients averaged over all {} ranks; the "
                     "frozen base sharded over the shard group of {} ({} base bytes on this rank)",
                     env_.world_size, layout_.shard_degree, backend.BaseBytes());
      } else {
        spdlog::info("model.peft: adapters replicated, gradients averaged over all {} ranks; the "
                     "frozen base is whole on every rank", env_.world_size);
      }
      HT_ASSIGN_OR_RETURN(auto peft, PeftDataParallelHooks::Create(*ctx_, backend));
      return std::unique_ptr<model::UnitHooks>(std::move(peft));
    }
    HT_ASSIGN_OR_RETURN(auto hooks, HsdpHooks::Create(*ctx_, backend, hsdp_));
    return std::unique_ptr<model::UnitHooks>(std::move(hooks));
  }

  void SetTrace(trace::Recorder* recorder) override {
    trace_ = recorder;
    if (ctx_ != nullptr) ctx_->SetTrace(recorder);
  }
  void FlushTrace() override {
    if (ctx_ != nullptr) ctx_->FlushTrace();
  }

 private:
  launch::RankEnv env_;
  DistOptions options_;
  GroupLayout layout_;
  HsdpOptions hsdp_;
  DeviceGroupsFactory device_groups_;
  std::unique_ptr<DistContext> ctx_;
  trace::Recorder* trace_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<train::ParallelRuntime>> CreateParallelRuntime(
    const config::TrainConfig& c, const launch::EnvLookup& env, DeviceGroupsFactory device_groups) {
  HT_ASSIGN_OR_RETURN(launch::RankEnv r, launch::ParseRankEnv(env));
  const ShardingStrategy strategy = c.sharding_strategy;
  if (c.shard_degree < 0 || c.shard_degree > (1 << 20)) {
    return InvalidArgument("model.shard_degree must be >= 0, got " + std::to_string(c.shard_degree));
  }
  if (!(c.collective_timeout_s > 0)) {
    return InvalidArgument("model.collective_timeout must be > 0 seconds");
  }
  auto layout = ComputeGroupLayout(strategy, static_cast<int>(c.shard_degree), r.world_size,
                                   r.local_world_size, r.rank);
  if (!layout.ok()) return InvalidArgument("model.shard_degree: " + layout.status().message());
  if (r.world_size == 1) return std::unique_ptr<train::ParallelRuntime>(new train::SingleProcessRuntime());

  DistOptions o;
  o.strategy = strategy;
  o.shard_degree = static_cast<int>(c.shard_degree);
  o.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.collective_timeout_s * 1000));
  o.hang_exit_code = contract::kExitCollectiveTimeout;
  // The distributed.* keys (HT_* overrides applied by runtime/config).
  const config::DistributedConfig& d = c.distributed;
  o.rendezvous_timeout = std::chrono::milliseconds(static_cast<int64_t>(d.rendezvous_timeout_s * 1000));
  o.gloo.hostname = d.gloo_hostname;
  if (const char* i = env("GLOO_SOCKET_IFNAME"); i && *i && o.gloo.hostname.empty()) o.gloo.iface = i;
  for (auto [from, to] : {std::pair{&d.nccl_shard, &o.nccl_shard}, {&d.nccl_replica, &o.nccl_replica},
                          {&d.nccl_world, &o.nccl_world}}) {
    to->max_ctas = static_cast<int>(from->max_ctas);
    to->low_priority = from->priority == "low";
  }
  HsdpOptions hsdp;
  hsdp.reduce_dtype = d.reduce_dtype == config::ReduceDtype::kBf16 ? DType::kBF16 : DType::kF32;
  // A/B switch for the split embedding gradient (docs/DISTRIBUTED.md).
  hsdp.split_embedding_grad = d.split_embedding_grad;
  // Replica all-reduce during the backward (default) or after it.
  hsdp.replica_reduce_during_backward = d.replica_reduce == "overlap";
  hsdp.fp8_all_gather = c.fp8.enabled;
  return std::unique_ptr<train::ParallelRuntime>(
      new DistRuntime(std::move(r), std::move(o), *layout, hsdp, std::move(device_groups)));
}

}  // namespace hypertrain::parallel
