#pragma once
// CheckpointManager: when to save, asynchronous saving, retention, and
// automatic resume, for one rank of a (possibly sharded) training run.
//
// Use from the training loop (every rank, same calls in the same order):
//   mgr.Start()                  -> checkpoint to resume from (or none)
//   mgr.Load(found, state)       -> restores this rank's owned ranges
//   per step: if (mgr.ShouldSave(step)) mgr.Save(request, state)
//   at the end: mgr.Save(final) if not just saved; mgr.Finish()
//
// Save() is the only stall: it waits for the previous save (at most one in
// flight: a new save WAITS rather than being skipped, so every requested
// checkpoint exists and memory stays bounded to one snapshot), copies the
// rank's master weights, m and v into host memory (pinned with the CUDA
// allocator; allocated once, reused), and returns; a background thread writes
// the files and, on rank 0, commits and applies save_top_k. The stall, write
// time and throughput are logged per save.
//
// A failed save (ENOSPC, EIO, a rank that never finished, parameters or
// optimizer state that are not finite: the run diverged) leaves every
// earlier checkpoint untouched: nothing is committed and retention runs only
// after a commit. It is reported at the next Save()/Finish():
// with failure_policy kContinue it is logged as an error and training goes on;
// with kStop that call returns the error.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/ckpt/format.h"
#include "runtime/ckpt/host_allocator.h"
#include "runtime/ckpt/store.h"
#include "core/status.h"
#include "runtime/config/options.h"

namespace hypertrain::ckpt {

// exp_manager.checkpoint.failure_policy, parsed by runtime/config.
using FailurePolicy = config::FailurePolicy;
using config::ParseFailurePolicy;

// The exp_manager keys (runtime/config maps YAML onto this).
struct CheckpointOptions {
  std::string dir;                   // exp_manager.checkpoint_dir ("" disables saving)
  int64_t every_n_train_steps = 0;   // 0: off
  double every_n_minutes = 0;        // 0: off
  int save_top_k = 3;                // newest k complete checkpoints kept; -1 keeps all
  bool save_last = true;             // a final save when training ends
  bool async_save = true;
  FailurePolicy failure_policy = FailurePolicy::kStop;
  std::string resume_from_checkpoint;  // a step directory: resume from exactly it
  bool start_fresh = false;            // ignore existing checkpoints
  bool verify_checksums = true;        // crc32c of every shard file at resume
  double coordinator_timeout_s = 600;  // rank 0 waiting for the others' files
  std::string attempt;                 // temp-dir suffix; "" = $RESTART_ATTEMPT or "0"
  Status Validate() const;
};

// Where this rank sits. Ranks r with replica_rank == 0 write shard shard_rank.
struct RankPlacement {
  int rank = 0;
  WorldLayout world;
  int shard_rank = 0;
  int replica_rank = 0;
};

// The trainer's state as seen by checkpointing (an adapter over
// model::Backend: Owned / ReadState / WriteState).
class StateAccess {
 public:
  virtual ~StateAccess() = default;
  virtual ElemRange Owned(int unit) const = 0;
  // Owned(unit).size() floats of state s (0 master, 1 adam m, 2 adam v).
  virtual Status Read(int unit, int state, float* host) = 0;
  virtual Status Write(int unit, int state, const float* host) = 0;
};

struct SaveRequest {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  std::string config_hash;
  nlohmann::json model_config = nlohmann::json::object();
  nlohmann::json trainer_state = nlohmann::json::object();  // lr schedule, loss scaler (same on all ranks)
  nlohmann::json sampler;  // this rank's
  nlohmann::json rng;      // this rank's
};

struct SaveStats {
  int saves_ok = 0;
  int saves_failed = 0;
  double last_stall_s = 0;   // time Save() blocked training
  double last_write_s = 0;   // background write (+ commit on rank 0)
  int64_t last_bytes = 0;    // bytes this rank wrote
  int64_t last_committed_step = -1;
};

class CheckpointManager {
 public:
  // `agree` makes every rank decide a time-based save alike (e.g. broadcast
  // rank 0's boolean). nullptr: single process decides alone; several ranks
  // agree through request files in the checkpoint directory (see .cc).
  CheckpointManager(CheckpointOptions options, RankPlacement placement, ModelLayoutDesc layout,
                    HostAllocator* allocator = nullptr,
                    std::function<StatusOr<bool>(bool)> agree = nullptr);
  // Abandons an in-flight save that is still waiting for other ranks (the
  // run is ending after an error; a normal end calls Finish() first), then
  // joins the writer.
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Rank 0 removes temporaries of crashed saves (call on every rank before
  // any rank can save, i.e. before the first training step). Then picks what
  // to resume from: nothing (start_fresh or no checkpoint), the forced
  // resume_from_checkpoint (an error if it does not verify), or the newest
  // complete one (corrupt ones skipped with a warning and, by rank 0, moved
  // aside as step-N.corrupt-<time>). Checkpoints exist but none verifies:
  // DataLoss listing each and why (FindLatestCheckpoint).
  StatusOr<std::optional<FoundCheckpoint>> Start();

  // Restores this rank's owned ranges from `found`, resharding when the world
  // layout differs. Warns when the config hash differs.
  Status Load(const FoundCheckpoint& found, StateAccess& state, const std::string& config_hash = "");

  // Whether `step` (just completed) should be saved. Every rank must call it
  // every step when every_n_minutes is set (it may run `agree`).
  StatusOr<bool> ShouldSave(int64_t step);

  // Starts allocating the host snapshot buffers on a background thread:
  // pinned memory takes seconds per 10 GB (24 s for an 8B shard), which
  // neither the start-up nor the first save's stall should pay. The first
  // Save() waits for it and reports its error.
  Status PrepareSnapshot(StateAccess& state);
  // Joins that allocation, if one runs; its outcome (Save() calls it).
  Status AwaitPreparedSnapshot();
  Status Save(const SaveRequest& request, StateAccess& state);
  // Waits for the in-flight save and reports its outcome per policy; with
  // `require_last`, the outcome of the last Save() is an error whatever the
  // policy (a final save that failed loses the run's last steps).
  Status Finish(bool require_last = false);
  // Bytes of this rank's host snapshot (0 for a rank that writes no shard).
  int64_t SnapshotBytes() const;

  SaveStats stats() const;
  const CheckpointOptions& options() const { return options_; }
  // The time-based interval, changed during the run (auto_checkpoint).
  void set_every_n_minutes(double minutes) { options_.every_n_minutes = minutes; }
  int64_t last_saved_step() const { return last_saved_step_; }
  // The last Load: this rank's bytes read and the seconds it took (0, 0: none).
  int64_t last_load_bytes() const { return last_load_bytes_; }
  double last_load_seconds() const { return last_load_seconds_; }

 private:
  Status EnsureSnapshotBuffers(StateAccess& state);
  // Load's crc32c check of the files this rank reads (defer_file_checksums_).
  Status VerifyFilesRead(const FoundCheckpoint& found, const CheckpointReader& reader, StateAccess& state);
  StatusOr<bool> AgreeThroughFiles(int64_t step, bool time_due);
  Status WaitAndReport();
  void WriteInBackground(SaveTarget target, RankRecord record, Manifest base);

  CheckpointOptions options_;
  RankPlacement placement_;
  ModelLayoutDesc layout_;
  HostAllocator* allocator_;
  std::function<StatusOr<bool>(bool)> agree_;
  bool defer_file_checksums_ = false;  // Start() left the files' crc32c to Load()

  std::vector<ElemRange> snap_ranges_;
  std::vector<HostBuffer> snap_;  // one per unit: 3 * owned floats
  std::thread preparer_;          // owns snap_ while it runs (PrepareSnapshot)
  Status prepared_;               // written by preparer_ before it exits
  std::thread writer_;
  std::atomic<bool> cancel_{false};
  bool in_flight_ = false;
  Status pending_;                // written by the writer thread before it exits
  Status last_result_;            // of the last save waited for
  int64_t pending_step_ = -1;
  std::chrono::steady_clock::time_point last_save_time_;
  int64_t last_saved_step_ = -1;
  int64_t last_load_bytes_ = 0;
  double last_load_seconds_ = 0;
  int64_t requested_step_ = -1;  // rank 0's pending time-based save request
  std::vector<std::string> created_dirs_;  // by Start(), deepest first
  mutable std::mutex mu_;
  SaveStats stats_;
};

}  // namespace hypertrain::ckpt
