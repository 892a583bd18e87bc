#pragma once
// What `hypertrain train` checks before any rendezvous, device memory or
// checkpoint work, so that a run that cannot finish fails in its first second
// with exit 2 naming the key, never after training:
//   - the output directories it writes later (checkpoint.export_hf_dir,
//     trainer.profile.dir) can be created and written;
//   - exp_manager.exp_dir is not used by another run: rank 0 (RANK unset or
//     0; under `hypertrain launch` the global rank 0, on node 0) holds an
//     exclusive lock, <exp_dir>/.hypertrain.lock (core/dir_lock.h), for the
//     whole run. One lock per job: the other ranks of the job share exp_dir
//     and take none; a second job's rank 0 is refused naming the holder (host,
//     pid) and its job fails with exit 2.
#include <string>

#include "core/dir_lock.h"
#include "core/status.h"
#include "runtime/config/config.h"
#include "runtime/launch/env.h"

namespace hypertrain::cmd {

// Held for the run: the lock (rank 0 only) and, when the run created
// exp_dir, its removal on release if nothing else was written there (a run
// that fails at start leaves no empty exp_dir behind).
class ExpDirGuard {
 public:
  ExpDirGuard() = default;
  ExpDirGuard(ExpDirGuard&& o) noexcept : lock_(std::move(o.lock_)), created_(std::move(o.created_)) {
    o.created_.clear();
  }
  ExpDirGuard& operator=(ExpDirGuard&&) = delete;
  ~ExpDirGuard();
  bool locked() const { return lock_.held(); }

 private:
  friend StatusOr<ExpDirGuard> Preflight(const config::TrainConfig& c, const launch::EnvLookup& env);
  DirLock lock_;
  std::string created_;  // exp_dir, when this run created it
};

// InvalidArgument "<key>: <path>: ..." when `path` cannot be a directory this
// process writes: the nearest existing part of it is not a directory or not
// writable. Creates nothing.
Status CheckWritableDir(const std::string& key, const std::string& path);

// The checks above, then (rank 0) the exp_dir lock.
StatusOr<ExpDirGuard> Preflight(const config::TrainConfig& c, const launch::EnvLookup& env);

}  // namespace hypertrain::cmd
