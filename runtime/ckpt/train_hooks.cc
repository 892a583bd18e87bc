#include "runtime/ckpt/train_hooks.h"

#include "runtime/ckpt/resume_checks.h"

#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/layout_desc.h"
#include "runtime/ckpt/peft_hooks.h"
#include "runtime/launch/env.h"
#include "runtime/parallel/groups.h"

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;

model::StateKind KindOf(int state) {
  switch (state) {
    case 0: return model::StateKind::kMasterParams;
    case 1: return model::StateKind::kAdamM;
    default: return model::StateKind::kAdamV;
  }
}

json ScalerJson(const train::LossScalerState& s) {
  return {{"scale", s.scale}, {"good_steps", s.good_steps}, {"skipped_steps", s.skipped_steps}};
}

}  // namespace

StatusOr<CheckpointOptions> OptionsFromConfig(const config::TrainConfig& c) {
  CheckpointOptions o;
  const config::CheckpointConfig& k = c.checkpoint;
  // Sharded checkpoints off (save_top_k: 0): an empty dir saves nothing and
  // resumes from nothing.
  o.dir = !k.enabled ? "" : c.checkpoint_dir.empty() ? c.exp_dir + "/checkpoints" : c.checkpoint_dir;
  o.every_n_train_steps = k.every_n_train_steps;
  o.every_n_minutes = k.every_n_minutes;
  o.save_top_k = k.enabled ? static_cast<int>(c.save_top_k) : 1;
  o.resume_from_checkpoint = c.resume_from_checkpoint;
  o.start_fresh = c.start_fresh;
  o.async_save = k.async_save;
  o.save_last = k.save_last;
  o.verify_checksums = k.verify_checksums;
  o.coordinator_timeout_s = k.coordinator_timeout_s;
  o.failure_policy = k.failure_policy;
  const Status v = o.Validate();
  if (!v.ok()) return v;
  return o;
}

std::string ConfigHash(const config::TrainConfig& c) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016zx", std::hash<std::string>{}(TrajectoryKeys(c).dump()));
  return buf;
}

StatusOr<RankPlacement> PlacementFor(const config::TrainConfig& c, int rank, int world_size) {
  RankPlacement p;
  p.rank = rank;
  p.world.world_size = world_size;
  if (world_size == 1) return p;
  HT_ASSIGN_OR_RETURN(launch::RankEnv env, launch::ParseRankEnv(ProcessEnvironment()));
  HT_ASSIGN_OR_RETURN(parallel::GroupLayout g,
                      parallel::ComputeGroupLayout(c.sharding_strategy, static_cast<int>(c.shard_degree), world_size,
                                               env.local_world_size, rank));
  p.world.nnodes = env.node.nnodes;
  if (c.finetune.peft.enabled()) {  // whole adapters on every rank: rank 0 writes them
    p.world.shard_degree = 1;
    p.world.replica_degree = world_size;
    p.world.strategy = "ddp";
    p.shard_rank = 0;
    p.replica_rank = rank;
    return p;
  }
  p.world.shard_degree = g.shard_degree;
  p.world.replica_degree = g.replica_degree;
  p.world.strategy = parallel::ShardingStrategyName(c.sharding_strategy);
  p.shard_rank = g.shard_rank;
  p.replica_rank = g.shard_group;
  return p;
}

StatusOr<std::unique_ptr<TrainCheckpointHooks>> CreateTrainCheckpointHooks(const config::TrainConfig& c, int rank,
                                                                           int world_size) {
  HT_ASSIGN_OR_RETURN(CheckpointOptions o, OptionsFromConfig(c));
  HT_ASSIGN_OR_RETURN(RankPlacement placement, PlacementFor(c, rank, world_size));
  return std::make_unique<TrainCheckpointHooks>(c, std::move(o), placement);
}

ElemRange BackendState::Owned(int unit) const {
  const model::Range r = b_.Owned(unit);
  return {r.begin, r.end};
}
Status BackendState::Read(int unit, int state, float* host) { return b_.ReadState(unit, KindOf(state), host); }
Status BackendState::Write(int unit, int state, const float* host) {
  return b_.WriteState(unit, KindOf(state), host);
}

TrainCheckpointHooks::TrainCheckpointHooks(const config::TrainConfig& c, CheckpointOptions options,
                                           RankPlacement placement, HostAllocator* allocator)
    : config_(c),
      options_(std::move(options)),
      placement_(placement),
      allocator_(allocator),
      config_hash_(ConfigHash(c)),
      trajectory_(TrajectoryKeys(c)),
      data_identity_(DataIdentity(c)) {}

Status TrainCheckpointHooks::EnsureManager(model::Backend& backend) {
  if (manager_ != nullptr) return Status::Ok();
  HostAllocator* alloc = allocator_ != nullptr ? allocator_ : PageableHostAllocator();
  manager_ = std::make_unique<CheckpointManager>(options_, placement_, DescribeLayout(backend.layout()), alloc);
  return Status::Ok();
}

StatusOr<bool> TrainCheckpointHooks::Restore(model::Backend& backend, train::TrainState& state) {
  HT_RETURN_IF_ERROR(EnsureManager(backend));
  HT_ASSIGN_OR_RETURN(std::optional<FoundCheckpoint> found, manager_->Start());
  BackendState access(backend);
  HT_RETURN_IF_ERROR(manager_->PrepareSnapshot(access));
  const bool peft = backend.BaseLayout() != nullptr;
  if (peft) {
    // The frozen base is never in a checkpoint: load it on every start.
    HT_RETURN_IF_ERROR(LoadFrozenBase(config_, backend));
    HT_ASSIGN_OR_RETURN(base_reference_, BaseReference(config_));
    if (placement_.rank == 0) {
      spdlog::info("frozen base {}", config_.finetune.hf_model_name_or_path.empty()
                                         ? "randomly initialised (no model.hf_model_name_or_path)"
                                         : "loaded from " + config_.finetune.hf_model_name_or_path);
    }
  }
  if (!found.has_value()) {
    if (!peft) HT_RETURN_IF_ERROR(InitFromHf(backend));
    return false;
  }
  const Manifest& m = found->manifest;
  const json& t = m.trainer_state;
  if (peft || t.contains("peft")) {
    if (!t.contains("peft")) {
      return FailedPrecondition(found->path + " is a full-training checkpoint; this run trains "
                                "PEFT adapters (start fresh or use another exp_dir)");
    }
    if (!peft) {
      return FailedPrecondition(found->path + " holds PEFT adapters; this run has model.peft off");
    }
    HT_RETURN_IF_ERROR(CheckBaseReference(t.at("peft"), base_reference_, found->path));
  }
  if (placement_.rank == 0) {
    for (const std::string& w : ResumeWarnings(found->path, t, m.config_hash, trajectory_, config_hash_, data_identity_)) {
      spdlog::warn("{}", w);
    }
  }
  HT_RETURN_IF_ERROR(manager_->Load(*found, access));  // the config hash is compared above, key by key
  try {
    state.step = m.step;
    state.tokens_seen = m.tokens_seen;
    state.adam_step = t.at("adam_step").get<int64_t>();
    state.scaler.scale = t.at("loss_scaler").at("scale").get<double>();
    state.scaler.good_steps = t.at("loss_scaler").at("good_steps").get<int64_t>();
    state.scaler.skipped_steps = t.at("loss_scaler").at("skipped_steps").get<int64_t>();
  } catch (const std::exception& e) {
    return DataLoss(found->path + "/manifest.json: trainer_state is incomplete: " + e.what());
  }
  // FP8 amax histories and scales: every rank holds the same (ReduceAmax),
  // saved once in the manifest; resuming continues them bit for bit.
  if (model::Fp8ScalingState* fp8 = backend.Fp8Scaling()) {
    if (t.contains("fp8")) {
      const Status st = fp8->FromJson(t.at("fp8").dump());
      if (!st.ok()) return DataLoss(found->path + "/manifest.json: " + st.message());
    } else if (placement_.rank == 0) {
      spdlog::info("{} has no FP8 scaling state (saved without model.fp8): amax histories start empty",
                   found->path);
    }
  } else if (t.contains("fp8") && placement_.rank == 0) {
    spdlog::info("{} carries FP8 scaling state; this run does not use FP8 GEMMs, so it is not used",
                 found->path);
  }
  // The sampler position is global (it moves past whole global batches), so
  // rank 0's record is valid for any rank of any world size; this rank's own
  // record is used when it exists.
  const RankRecord* rec = m.FindRank(placement_.rank);
  if (rec == nullptr || m.world.world_size != placement_.world.world_size) rec = m.FindRank(0);
  if (rec == nullptr || rec->sampler.is_null()) return DataLoss(found->path + ": no sampler state");
  StatusOr<data::SamplerState> ss = data::SamplerState::FromJson(rec->sampler.dump());
  if (!ss.ok()) return DataLoss(found->path + ": sampler state: " + ss.status().message());
  state.data = *ss;
  return true;
}

Status TrainCheckpointHooks::InitFromHf(model::Backend& backend) {
  std::string dir = config_.finetune.hf_model_name_or_path;
  if (dir.empty()) dir = config_.checkpoint.hf_init_from;
  if (dir.empty()) return Status::Ok();
  StatusOr<HfWeights> opened = HfWeights::Open(dir, config_.model);
  if (!opened.ok()) {
    return Status(opened.status().code(), "exp_manager.hf_init_from: " + opened.status().message());
  }
  HfWeights w = std::move(opened).value();
  const ModelLayoutDesc d = DescribeLayout(backend.layout());
  HT_RETURN_IF_ERROR(w.CheckCovers(d));
  std::vector<float> buf;
  for (const UnitEntry& u : d.units) {
    const model::Range r = backend.Owned(u.index);
    buf.assign(r.size(), 0.0f);
    HT_RETURN_IF_ERROR(w.ReadRange(u, {r.begin, r.end}, buf.data()));
    HT_RETURN_IF_ERROR(backend.WriteState(u.index, model::StateKind::kMasterParams, buf.data()));
  }
  if (placement_.rank == 0) spdlog::info("initialised weights from {}", dir);
  return Status::Ok();
}

SaveRequest TrainCheckpointHooks::MakeRequest(model::Backend& backend, const train::TrainState& state) const {
  SaveRequest r;
  r.step = state.step;
  r.tokens_seen = state.tokens_seen;
  r.config_hash = config_hash_;
  r.model_config = HfConfigJson(config_.model, StDType::kF32);
  r.trainer_state = {{"adam_step", state.adam_step},
                     {"loss_scaler", ScalerJson(state.scaler)},
                     {"lr_schedule",
                      {{"kind", static_cast<int>(config_.optim.sched)},
                       {"lr", config_.optim.lr},
                       {"min_lr", config_.optim.min_lr},
                       {"warmup_steps", config_.optim.warmup_steps},
                       {"max_steps", config_.max_steps},
                       {"next_step", state.step}}}};
  if (const model::Fp8ScalingState* fp8 = backend.Fp8Scaling()) {
    r.trainer_state["fp8"] = json::parse(fp8->ToJson());
  }
  if (backend.BaseLayout() != nullptr) r.trainer_state["peft"] = base_reference_;  // set by Restore
  r.trainer_state["trajectory"] = trajectory_;  // what a resume compares (resume_checks.h)
  r.trainer_state["data"] = data_identity_;
  r.sampler = json::parse(state.data.ToJson());
  // The trainer has no other random state: initialisation and synthetic data
  // are counter-based on (seed, position).
  r.rng = {{"seed", config_.seed}};
  return r;
}

Status TrainCheckpointHooks::SaveNow(model::Backend& backend, const train::TrainState& state) {
  if (backend.BaseLayout() != nullptr && base_reference_.is_null()) {
    HT_ASSIGN_OR_RETURN(base_reference_, BaseReference(config_));
  }
  HT_RETURN_IF_ERROR(backend.Synchronize());
  BackendState access(backend);
  return manager_->Save(MakeRequest(backend, state), access);
}

double AutoCheckpointInterval(double stall_s, const config::CheckpointConfig& k) {
  const double for_overhead = stall_s / k.auto_max_overhead;
  const double max_lost = k.auto_max_lost_minutes * 60.0;
  return std::max({k.auto_min_interval_s, 1e-3, std::min(for_overhead, max_lost)});
}

void TrainCheckpointHooks::UpdateAutoInterval(bool saved) {
  const auto now = std::chrono::steady_clock::now();
  if (last_step_end_ != std::chrono::steady_clock::time_point{}) {
    step_seconds_sum_ += std::chrono::duration<double>(now - last_step_end_).count();
    ++steps_timed_;
  }
  if (saved) {
    const double stall = manager_->stats().last_stall_s;
    const double step_s = steps_timed_ > 0 ? step_seconds_sum_ / steps_timed_ : 0;
    auto_interval_s_ = AutoCheckpointInterval(stall, config_.checkpoint);
    manager_->set_every_n_minutes(auto_interval_s_ / 60.0);
    if (placement_.rank == 0) {
      const bool capped = stall / config_.checkpoint.auto_max_overhead > config_.checkpoint.auto_max_lost_minutes * 60;
      spdlog::info("auto_checkpoint: save stall {:.3f} s, step {:.3f} s -> a checkpoint every {:.1f} s (~{} steps): "
                   "overhead {:.2f}%{}, at most {:.1f} s of work lost",
                   stall, step_s, auto_interval_s_,
                   step_s > 0 ? static_cast<int64_t>(auto_interval_s_ / step_s + 0.5) : 0,
                   100.0 * stall / (auto_interval_s_ + stall),
                   capped ? " (above max_overhead: max_lost_minutes wins)" : "", auto_interval_s_ + step_s);
    }
    step_seconds_sum_ = 0;
    steps_timed_ = 0;
    last_step_end_ = std::chrono::steady_clock::now();  // the stall is not step time
    return;
  }
  last_step_end_ = now;
}

Status TrainCheckpointHooks::AfterStep(model::Backend& backend, const train::TrainState& state) {
  HT_RETURN_IF_ERROR(EnsureManager(backend));
  const bool auto_interval = config_.checkpoint.auto_interval && !options_.dir.empty();
  if (auto_interval && auto_interval_s_ == 0) {
    auto_interval_s_ = std::max(config_.checkpoint.auto_min_interval_s, 1e-3);
    manager_->set_every_n_minutes(auto_interval_s_ / 60.0);
  }
  HT_ASSIGN_OR_RETURN(bool due, manager_->ShouldSave(state.step));
  if (due) HT_RETURN_IF_ERROR(SaveNow(backend, state));
  if (auto_interval) UpdateAutoInterval(due);
  const int64_t every = config_.checkpoint.export_every_n_train_steps;
  if (every > 0 && state.step % every == 0 && state.step < config_.max_steps) {
    HT_RETURN_IF_ERROR(ExportFullModel(backend, state, config_.checkpoint.export_dir + "/" + StepDirName(state.step)));
  }
  return Status::Ok();
}

Status TrainCheckpointHooks::Finish(model::Backend& backend, const train::TrainState& state) {
  HT_RETURN_IF_ERROR(EnsureManager(backend));
  // The final step must be on disk: a periodic save of it (max_steps a
  // multiple of every_n_train_steps) that failed is an error too, not only a
  // separate final save (failure_policy: continue covers earlier steps only).
  const bool save_last = options_.save_last && !options_.dir.empty();
  if (save_last && manager_->last_saved_step() != state.step) HT_RETURN_IF_ERROR(SaveNow(backend, state));
  HT_RETURN_IF_ERROR(manager_->Finish(/*require_last=*/save_last));
  if (backend.BaseLayout() != nullptr && placement_.rank == 0) {
    // PEFT: the trained adapter always (PEFT's adapter_config.json +
    // adapter_model.safetensors); the full exports below are base + adapter merged.
    const std::string& dir = config_.finetune.adapter_dir;
    HT_RETURN_IF_ERROR(ExportAdapterFromBackend(config_, backend, dir));
    spdlog::info("wrote the PEFT adapter to {}", dir);
  }
  const config::CheckpointConfig& k = config_.checkpoint;
  const bool periodic_due = k.export_every_n_train_steps > 0 && state.step % k.export_every_n_train_steps == 0;
  if (k.export_save_last || periodic_due) {
    HT_RETURN_IF_ERROR(ExportFullModel(backend, state, k.export_dir + "/" + StepDirName(state.step)));
  }
  if (!k.export_hf_dir.empty()) HT_RETURN_IF_ERROR(ExportFullModel(backend, state, k.export_hf_dir));
  return Status::Ok();
}

// Before this process saved once: the bytes this rank writes at an assumed
// 1 GB/s (a shared file system's per-client rate), plus a second.
double TrainCheckpointHooks::EstimatedSaveSeconds() const {
  if (manager_ == nullptr || options_.dir.empty()) return 0;
  const SaveStats s = manager_->stats();
  if (s.saves_ok > 0) return s.last_stall_s + s.last_write_s;
  return static_cast<double>(manager_->SnapshotBytes()) / 1e9 + 1.0;
}

Status TrainCheckpointHooks::Stop(model::Backend& backend, const train::TrainState& state, bool save) {
  HT_RETURN_IF_ERROR(EnsureManager(backend));
  const bool save_stop = save && !options_.dir.empty();
  if (save_stop && manager_->last_saved_step() != state.step) HT_RETURN_IF_ERROR(SaveNow(backend, state));
  return manager_->Finish(/*require_last=*/save_stop);
}

// From the sharded checkpoint of this very step when there is one, else from
// a synchronous save into <export_dir>/.staging (one kept): every rank takes
// part in the save, rank 0 (which commits it) writes the HF files.
Status TrainCheckpointHooks::ExportFullModel(model::Backend& backend, const train::TrainState& state,
                                             const std::string& out_dir) {
  const StDType dtype = config_.checkpoint.export_dtype == "bf16" ? StDType::kBF16 : StDType::kF32;
  if (backend.BaseLayout() != nullptr) {
    // PEFT: the checkpoints hold only the adapters; every rank holds the
    // same adapters, so rank 0 merges from its backend. A sharded base is
    // gathered first, which every rank takes part in.
    if (placement_.rank != 0 && !backend.ShardsBase()) return Status::Ok();
    HT_RETURN_IF_ERROR(backend.Synchronize());
    HT_RETURN_IF_ERROR(
        ExportMergedFromBackend(config_, backend, out_dir, dtype, /*write=*/placement_.rank == 0));
    if (placement_.rank != 0) return Status::Ok();
    spdlog::info("exported step {}: base + adapter merged as Hugging Face Llama to {} ({})", state.step, out_dir,
                 config_.checkpoint.export_dtype);
    return Status::Ok();
  }
  std::string root;
  if (!options_.dir.empty() && manager_->last_saved_step() == state.step) {
    HT_RETURN_IF_ERROR(manager_->Finish());  // committed before it is read
    root = options_.dir;
  } else {
    if (export_staging_ == nullptr) {
      CheckpointOptions so = options_;
      so.dir = config_.checkpoint.export_dir + "/.staging";
      so.save_top_k = 1;
      so.async_save = false;
      so.every_n_train_steps = 0;
      so.every_n_minutes = 0;
      so.resume_from_checkpoint.clear();
      so.start_fresh = false;
      so.failure_policy = FailurePolicy::kStop;
      HostAllocator* alloc = allocator_ != nullptr ? allocator_ : PageableHostAllocator();
      export_staging_ =
          std::make_unique<CheckpointManager>(so, placement_, DescribeLayout(backend.layout()), alloc);
    }
    if (export_staging_->last_saved_step() != state.step) {
      // No Start(): nothing resumes from staging. Made again for each export:
      // rank 0 removes it once empty.
      HT_RETURN_IF_ERROR(MakeDirs(export_staging_->options().dir));
      HT_RETURN_IF_ERROR(backend.Synchronize());
      BackendState access(backend);
      HT_RETURN_IF_ERROR(export_staging_->Save(MakeRequest(backend, state), access));
    }
    root = export_staging_->options().dir;
  }
  if (placement_.rank != 0) return Status::Ok();
  const std::string dir = root + "/" + StepDirName(state.step);
  HT_ASSIGN_OR_RETURN(Manifest m, VerifyCheckpoint(dir, false));
  HT_ASSIGN_OR_RETURN(CheckpointReader reader, CheckpointReader::Open(dir, std::move(m)));
  // The base's config.json and generation_config.json (token ids, context,
  // RoPE) carry over into the export.
  const std::string& base_dir = config_.finetune.hf_model_name_or_path.empty() ? config_.checkpoint.hf_init_from
                                                                               : config_.finetune.hf_model_name_or_path;
  HT_ASSIGN_OR_RETURN(HfBase base, ReadHfBase(base_dir));
  HT_RETURN_IF_ERROR(ExportHfFromCheckpoint(reader, config_.model, out_dir, dtype, base));
  spdlog::info("exported step {} as Hugging Face Llama to {} ({})", state.step, out_dir,
               config_.checkpoint.export_dtype);
  if (root != options_.dir) {  // the staging copy has served its purpose
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove(root, ec);  // only when empty: no empty .staging/ is left behind
  }
  return Status::Ok();
}

}  // namespace hypertrain::ckpt
