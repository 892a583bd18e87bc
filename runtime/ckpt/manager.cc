#include "runtime/ckpt/manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <unistd.h>

#include "contract/env.h"
#include "core/atomic_file.h"
#include "core/env_lookup.h"

namespace hypertrain::ckpt {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string Mb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}


// A diverged run's state (inf/NaN) is never committed, so it can never
// replace or evict a good checkpoint.
Status CheckFinite(int64_t step, const ShardData& data) {
  for (size_t u = 0; u < data.states.size(); ++u) {
    const int64_t n = data.ranges[u].size();
    for (int s = 0; s < kNumStates; ++s) {
      const float* p = data.states[u][s];
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(p[i])) {
          return FailedPrecondition("step " + std::to_string(step) + ": " + kStateNames[s] + " of unit " +
                                    std::to_string(u) + " hold a non-finite value (" + std::to_string(p[i]) +
                                    " at element " + std::to_string(data.ranges[u].begin + i) +
                                    "): the run diverged; this state is not saved");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckpointOptions::Validate() const {
  if (every_n_train_steps < 0) return InvalidArgument("exp_manager.every_n_train_steps must be >= 0");
  if (every_n_minutes < 0) return InvalidArgument("exp_manager.every_n_minutes must be >= 0");
  if (save_top_k == 0 || save_top_k < -1) {
    return InvalidArgument("exp_manager.save_top_k must be >= 1, or -1 to keep every checkpoint (got " +
                           std::to_string(save_top_k) + ")");
  }
  if (start_fresh && !resume_from_checkpoint.empty()) {
    return InvalidArgument("exp_manager.resume_from_checkpoint and start_fresh exclude each other");
  }
  if (coordinator_timeout_s <= 0) return InvalidArgument("checkpoint coordinator timeout must be > 0");
  for (char c : attempt) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) {
      return InvalidArgument("checkpoint attempt id may hold only [A-Za-z0-9_-]");
    }
  }
  return Status::Ok();
}

CheckpointManager::CheckpointManager(CheckpointOptions options, RankPlacement placement, ModelLayoutDesc layout,
                                     HostAllocator* allocator,
                                     std::function<StatusOr<bool>(bool)> agree)
    : options_(std::move(options)),
      placement_(placement),
      layout_(std::move(layout)),
      allocator_(allocator != nullptr ? allocator : PageableHostAllocator()),
      agree_(std::move(agree)),
      last_save_time_(Clock::now()) {
  if (options_.attempt.empty()) {
    const char* a = ProcessEnvironment()(contract::env::kRestartAttempt);
    options_.attempt = a != nullptr && *a != '\0' ? a : "0";
    for (char& c : options_.attempt) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
  }
}

CheckpointManager::~CheckpointManager() {
  if (preparer_.joinable()) preparer_.join();
  cancel_.store(true);
  if (writer_.joinable()) writer_.join();
  // rmdir removes only an empty directory: never anything a rank wrote.
  if (last_saved_step_ < 0) {
    for (const std::string& d : created_dirs_) ::rmdir(d.c_str());
  }
}

StatusOr<std::optional<FoundCheckpoint>> CheckpointManager::Start() {
  HT_RETURN_IF_ERROR(options_.Validate());
  if (!options_.dir.empty()) {
    // The directories this creates are removed again if the run ends before
    // its first save (a config or data error): no empty checkpoints/ left.
    std::error_code ec;
    for (std::filesystem::path d = std::filesystem::absolute(options_.dir, ec);
         !ec && d.has_relative_path() && !std::filesystem::exists(d, ec); d = d.parent_path()) {
      created_dirs_.push_back(d.string());
    }
    HT_RETURN_IF_ERROR(MakeDirs(options_.dir));
    if (placement_.rank == 0) {
      // A directory this run cannot write is a configuration error now, not
      // a failed save after hours of training.
      const std::string probe = options_.dir + "/.write-probe-" + options_.attempt;
      HT_RETURN_IF_ERROR(WriteFileAtomically(probe, ""));
      ::unlink(probe.c_str());
      HT_RETURN_IF_ERROR(CleanStaleTemporaries(options_.dir));
    }
  }
  if (options_.start_fresh) {
    spdlog::info("start_fresh: ignoring any existing checkpoint");
    return std::optional<FoundCheckpoint>();
  }
  // One process checks every shard file's crc32c before choosing; a rank of
  // several checks only those it reads, in Load (each rank reading all
  // world-size files costs O(ranks) per rank: 96 GB each for an 8B model on
  // 4 GPUs).
  defer_file_checksums_ = options_.verify_checksums && placement_.world.world_size > 1;
  const VerifyOptions verify{options_.verify_checksums, options_.verify_checksums && !defer_file_checksums_};
  if (!options_.resume_from_checkpoint.empty()) {
    StatusOr<Manifest> m = VerifyCheckpoint(options_.resume_from_checkpoint, verify);
    if (!m.ok()) {
      return Status(m.status().code(), "resume_from_checkpoint " + options_.resume_from_checkpoint +
                                           " is not usable: " + m.status().message());
    }
    return std::optional<FoundCheckpoint>(FoundCheckpoint{options_.resume_from_checkpoint, std::move(m).value()});
  }
  if (options_.dir.empty()) return std::optional<FoundCheckpoint>();
  StatusOr<FoundCheckpoint> f = FindLatestCheckpoint(options_.dir, verify);
  if (!f.ok()) {
    if (f.status().code() == StatusCode::kNotFound) {
      spdlog::info("no checkpoint in {}: starting from initialisation", options_.dir);
      return std::optional<FoundCheckpoint>();
    }
    return f.status();
  }
  // Newer checkpoints that failed verification would be taken over by this
  // run's saves of the same steps: rank 0 moves them aside now (never
  // deleted). Only content failures: an I/O error may pass.
  if (placement_.rank == 0) {
    for (const UnusableCheckpoint& u : f->skipped) {
      if (u.why.code() != StatusCode::kDataLoss && u.why.code() != StatusCode::kNotFound) continue;
      HT_ASSIGN_OR_RETURN(std::string aside, MoveAside(u.path, "corrupt"));
      spdlog::warn("moved unusable checkpoint {} aside to {} (kept for inspection)", u.path, aside);
    }
  }
  return std::optional<FoundCheckpoint>(std::move(f).value());
}

Status CheckpointManager::VerifyFilesRead(const FoundCheckpoint& found, const CheckpointReader& reader,
                                          StateAccess& state) {
  const auto t0 = Clock::now();
  int64_t bytes = 0;
  const Status s = reader.VerifyFilesFor(layout_, [&](int unit) { return state.Owned(unit); }, &bytes);
  if (s.ok()) {
    spdlog::info("rank {}: crc32c of the shard files it reads ({}) verified in {:.3f} s", placement_.rank, Mb(bytes),
                 SecondsSince(t0));
    return Status::Ok();
  }
  if (s.code() != StatusCode::kDataLoss) return s;
  if (!options_.resume_from_checkpoint.empty()) {
    return DataLoss("resume_from_checkpoint " + found.path + " is not usable: " + s.message());
  }
  // The other ranks chose it too and may be reading it: this rank moves it
  // aside (never deletes it) and fails retryably, so the gang's restart
  // resumes from the previous checkpoint on every rank alike.
  StatusOr<std::string> aside = MoveAside(found.path, "corrupt");
  const std::string where = aside.ok() ? "moved aside to " + *aside
                                       : "not moved aside (" + aside.status().message() + "; another rank may have)";
  return Unavailable(s.message() + "; " + found.path + " " + where +
                     ": the gang's restart resumes from the previous checkpoint");
}

Status CheckpointManager::Load(const FoundCheckpoint& found, StateAccess& state, const std::string& config_hash) {
  const auto t0 = Clock::now();
  const Manifest& m = found.manifest;
  if (!config_hash.empty() && m.config_hash != config_hash) {
    spdlog::warn("resuming {} written with config hash {}, current config hash is {}", found.path, m.config_hash,
                 config_hash);
  }
  HT_ASSIGN_OR_RETURN(CheckpointReader reader, CheckpointReader::Open(found.path, m));
  HT_RETURN_IF_ERROR(reader.CheckCompatible(layout_));
  if (defer_file_checksums_) HT_RETURN_IF_ERROR(VerifyFilesRead(found, reader, state));
  const WorldLayout& old = m.world;
  const WorldLayout& now = placement_.world;
  if (old.world_size != now.world_size || old.shard_degree != now.shard_degree) {
    // The sampler position is global (whole global batches): the data order
    // continues exactly when the global batch is unchanged.
    spdlog::warn("resharding {} from world {} (shard degree {}) to world {} (shard degree {}): parameters and "
                 "optimizer state are exact; the data continues at the same global sample position (the same "
                 "order when the global batch size is unchanged)",
                 found.path, old.world_size, old.shard_degree, now.world_size, now.shard_degree);
  }
  // Unit u+1 is read from disk (and checked finite) on a second thread while
  // unit u goes to the device: a load costs max(read, copy), not their sum.
  const std::vector<UnitEntry>& units = layout_.units;
  std::array<std::vector<float>, 2> bufs;
  auto read_unit = [&](size_t i) -> Status {
    const UnitEntry& u = units[i];
    const ElemRange r = state.Owned(u.index);
    std::vector<float>& buf = bufs[i % 2];
    buf.resize(static_cast<size_t>(r.size()) * kNumStates);
    std::array<float*, kNumStates> dst;
    for (int s = 0; s < kNumStates; ++s) dst[s] = buf.data() + s * r.size();
    HT_RETURN_IF_ERROR(reader.ReadRange(u, r, dst));
    for (size_t k = 0; k < buf.size(); ++k) {
      if (!std::isfinite(buf[k])) {
        return DataLoss(found.path + ": " + kStateNames[k / std::max<int64_t>(1, r.size())] + " of unit " + u.name +
                        " hold a non-finite value: not resuming from it");
      }
    }
    return Status::Ok();
  };
  int64_t bytes = 0;
  std::future<Status> next;
  if (!units.empty()) next = std::async(std::launch::async, read_unit, 0);
  for (size_t i = 0; i < units.size(); ++i) {
    HT_RETURN_IF_ERROR(next.get());
    if (i + 1 < units.size()) next = std::async(std::launch::async, read_unit, i + 1);
    const ElemRange r = state.Owned(units[i].index);
    const float* buf = bufs[i % 2].data();
    for (int s = 0; s < kNumStates; ++s) HT_RETURN_IF_ERROR(state.Write(units[i].index, s, buf + s * r.size()));
    bytes += r.size() * kNumStates * 4;
  }
  last_saved_step_ = m.step;
  const double secs = SecondsSince(t0);
  last_load_bytes_ = bytes;
  last_load_seconds_ = secs;
  // Per rank: the recovery time's checkpoint-load phase (docs/PERF.md).
  spdlog::info("resumed from {} (step {}): rank {} read {} in {:.3f} s ({:.2f} GB/s)", found.path, m.step,
               placement_.rank, Mb(bytes), secs, secs > 0 ? 1e-9 * static_cast<double>(bytes) / secs : 0.0);
  return Status::Ok();
}

StatusOr<bool> CheckpointManager::ShouldSave(int64_t step) {
  if (options_.dir.empty()) return false;
  bool due = options_.every_n_train_steps > 0 && step % options_.every_n_train_steps == 0;
  if (options_.every_n_minutes > 0) {
    bool time_due = SecondsSince(last_save_time_) >= options_.every_n_minutes * 60.0;
    if (agree_) {
      HT_ASSIGN_OR_RETURN(time_due, agree_(time_due));
    } else if (placement_.world.world_size > 1) {
      HT_ASSIGN_OR_RETURN(time_due, AgreeThroughFiles(step, time_due));
    }
    due = due || time_due;
  }
  return due && step != last_saved_step_;
}

Status CheckpointManager::EnsureSnapshotBuffers(StateAccess& state) {
  HT_RETURN_IF_ERROR(AwaitPreparedSnapshot());
  bool same = snap_.size() == layout_.units.size();
  for (size_t u = 0; same && u < layout_.units.size(); ++u) same = snap_ranges_[u] == state.Owned(static_cast<int>(u));
  if (same) return Status::Ok();
  snap_.clear();
  snap_ranges_.clear();
  for (const UnitEntry& u : layout_.units) {
    const ElemRange r = state.Owned(u.index);
    snap_ranges_.push_back(r);
    HT_ASSIGN_OR_RETURN(HostBuffer b, HostBuffer::Make(allocator_, static_cast<size_t>(r.size()) * kNumStates * 4));
    snap_.push_back(std::move(b));
  }
  return Status::Ok();
}

// Without a collective, ranks agree on a time-based save through the shared
// checkpoint directory: rank 0, when its clock says a save is due after step
// s, writes ".save-request-<s+2>"; every rank saves at the step whose request
// file exists. Ranks are at most one step apart (every step has collectives),
// so when any rank finishes step s+2, rank 0 has finished step s and the
// request is visible on a coherent shared file system.
StatusOr<bool> CheckpointManager::AgreeThroughFiles(int64_t step, bool time_due) {
  auto request = [&](int64_t s) { return options_.dir + "/.save-request-" + std::to_string(s); };
  if (placement_.rank == 0) {
    if (time_due && requested_step_ < step) {
      requested_step_ = step + 2;
      HT_RETURN_IF_ERROR(WriteFileAtomically(request(requested_step_), "time-based save\n"));
    }
    ::unlink(request(step - 4).c_str());  // every rank has passed it
  }
  return FileSize(request(step)).ok();
}

Status CheckpointManager::PrepareSnapshot(StateAccess& state) {
  if (options_.dir.empty() || placement_.replica_rank != 0 || preparer_.joinable()) return Status::Ok();
  std::vector<ElemRange> ranges;
  for (const UnitEntry& u : layout_.units) ranges.push_back(state.Owned(u.index));
  snap_.clear();
  snap_ranges_.clear();
  std::function<void()> bind = allocator_->BindThread();
  preparer_ = std::thread([this, ranges = std::move(ranges), bind = std::move(bind)] {
    if (bind) bind();
    const auto t0 = Clock::now();
    std::vector<HostBuffer> buffers;
    int64_t bytes = 0;
    for (const ElemRange& r : ranges) {
      StatusOr<HostBuffer> b = HostBuffer::Make(allocator_, static_cast<size_t>(r.size()) * kNumStates * 4);
      if (!b.ok()) {
        prepared_ = b.status();
        return;
      }
      bytes += static_cast<int64_t>(b->size());
      buffers.push_back(std::move(*b));
    }
    snap_ = std::move(buffers);
    snap_ranges_ = ranges;
    spdlog::debug("checkpoint snapshot buffers: {} ({}) allocated in {:.2f} s in the background", Mb(bytes),
                  allocator_->name(), SecondsSince(t0));
  });
  return Status::Ok();
}

Status CheckpointManager::AwaitPreparedSnapshot() {
  if (!preparer_.joinable()) return Status::Ok();
  preparer_.join();
  Status s = std::move(prepared_);
  prepared_ = Status::Ok();
  return s;
}

Status CheckpointManager::WaitAndReport() {
  if (!in_flight_) return Status::Ok();
  writer_.join();
  in_flight_ = false;
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = pending_;
  }
  last_result_ = s;
  if (s.ok()) return Status::Ok();
  const std::string msg = "checkpoint of step " + std::to_string(pending_step_) + " FAILED: " + s.ToString() +
                          "; earlier checkpoints are intact" +
                          (options_.failure_policy == FailurePolicy::kStop ? " (failure_policy=stop: stopping)"
                                                                           : " (failure_policy=continue: training goes on)");
  spdlog::error("{}", msg);
  if (options_.failure_policy == FailurePolicy::kStop) return Status(s.code(), msg);
  return Status::Ok();
}

void CheckpointManager::WriteInBackground(SaveTarget target, RankRecord record, Manifest base) {
  const auto t0 = Clock::now();
  ShardData data;
  data.ranges = snap_ranges_;
  for (size_t u = 0; u < snap_.size(); ++u) {
    const float* p = static_cast<const float*>(snap_[u].data());
    const int64_t n = snap_ranges_[u].size();
    data.states.push_back({p, p + n, p + 2 * n});
  }
  WriteStats ws;
  Status s = CheckFinite(target.step, data);
  if (s.ok()) s = WriteRankFiles(target, &data, record, &ws);
  if (!s.ok()) ReportRankFailure(target, s);
  std::string committed;
  if (s.ok() && placement_.rank == 0) {
    StatusOr<std::string> dir = CommitCheckpoint(target, std::move(base));
    if (dir.ok()) {
      committed = *dir;
      s = ApplyRetention(target.root, options_.save_top_k, target.step);
    } else {
      s = dir.status();
    }
  }
  const double secs = SecondsSince(t0);
  std::lock_guard<std::mutex> lock(mu_);
  pending_ = s;
  if (s.ok()) {
    ++stats_.saves_ok;
    stats_.last_write_s = secs;
    stats_.last_bytes = ws.bytes;
    stats_.last_committed_step = target.step;
    spdlog::info("checkpoint step {}: rank {} wrote {} in {:.3f} s ({:.1f} MB/s){}", target.step, placement_.rank,
                 Mb(ws.bytes), secs, secs > 0 ? ws.bytes / 1e6 / secs : 0.0,
                 committed.empty() ? "" : "; committed " + committed);
  } else {
    ++stats_.saves_failed;
  }
}

Status CheckpointManager::Save(const SaveRequest& req, StateAccess& state) {
  if (options_.dir.empty()) return FailedPrecondition("Save() without exp_manager.checkpoint_dir");
  const auto t0 = Clock::now();
  HT_RETURN_IF_ERROR(WaitAndReport());
  const bool writes = placement_.replica_rank == 0;
  if (writes) {
    HT_RETURN_IF_ERROR(EnsureSnapshotBuffers(state));
    for (size_t u = 0; u < snap_.size(); ++u) {
      float* p = static_cast<float*>(snap_[u].data());
      const int64_t n = snap_ranges_[u].size();
      for (int s = 0; s < kNumStates; ++s) HT_RETURN_IF_ERROR(state.Read(static_cast<int>(u), s, p + s * n));
    }
  }
  SaveTarget target;
  target.root = options_.dir;
  target.step = req.step;
  target.attempt = options_.attempt;
  target.rank = placement_.rank;
  target.world_size = placement_.world.world_size;
  target.writes_shard = writes;
  target.shard_rank = placement_.shard_rank;
  target.shard_degree = placement_.world.shard_degree;
  target.coordinator_timeout_s = options_.coordinator_timeout_s;
  target.cancel = &cancel_;
  RankRecord record{placement_.rank, req.sampler, req.rng};
  Manifest base;
  base.step = req.step;
  base.tokens_seen = req.tokens_seen;
  base.config_hash = req.config_hash;
  base.model_config = req.model_config;
  base.trainer_state = req.trainer_state;
  base.world = placement_.world;
  base.layout = layout_;
  pending_step_ = req.step;
  last_saved_step_ = req.step;
  last_save_time_ = Clock::now();
  int64_t snap_bytes = 0;
  for (const HostBuffer& h : snap_) snap_bytes += static_cast<int64_t>(h.size());
  in_flight_ = true;
  writer_ = std::thread(&CheckpointManager::WriteInBackground, this, std::move(target), std::move(record),
                        std::move(base));
  Status result = Status::Ok();
  if (!options_.async_save) result = WaitAndReport();
  const double stall = SecondsSince(t0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.last_stall_s = stall;
  }
  spdlog::info("checkpoint step {}: training stall {:.3f} s (snapshot of {}{})", req.step, stall, Mb(snap_bytes),
               options_.async_save ? ", written in background" : ", written synchronously");
  return result;
}

Status CheckpointManager::Finish(bool require_last) {
  HT_RETURN_IF_ERROR(WaitAndReport());
  if (require_last && !last_result_.ok()) {
    return Status(last_result_.code(), "the final checkpoint (step " + std::to_string(pending_step_) +
                                           ") was not written: " + last_result_.message() +
                                           "; its steps are lost unless the run resumes from an earlier checkpoint");
  }
  return Status::Ok();
}

int64_t CheckpointManager::SnapshotBytes() const {
  if (placement_.replica_rank != 0) return 0;
  int64_t n = 0;
  for (const UnitEntry& u : layout_.units) n += u.padded_numel;
  // Owned ranges are a 1/shard_degree slice of every unit; three fp32 states.
  return n / std::max(1, placement_.world.shard_degree) * kNumStates * 4;
}

SaveStats CheckpointManager::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace hypertrain::ckpt
