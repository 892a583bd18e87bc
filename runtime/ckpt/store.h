#pragma once
// Checkpoint directories on disk: the commit protocol, discovery of the
// newest complete checkpoint, retention, and reading (with resharding).
//
// Commit protocol for step N (docs/CHECKPOINTS.md):
//  1. Every rank writes into <root>/.step-N.tmp-<attempt>/ (created by
//     whoever comes first): a shard writer (replica 0) its shard file
//     (atomic: temp, fsync, rename, fsync dir), then EVERY rank its
//     rank-<r>.json (sampler/RNG state and, for writers, the shard file's size,
//     crc32c and ranges), also atomically. rank-<r>.json existing means that
//     rank's part is durable.
//  2. Rank 0 waits until all world_size rank files exist (this is the
//     barrier; it uses the shared file system, not a collective, so it can run
//     on a background thread while training keeps using the process group),
//     writes manifest.json atomically, removes the rank files, fsyncs the temp
//     directory, and renames it to <root>/step-N, then fsyncs <root>.
//  The rename is the commit: "step-N" exists only complete. No separate
//  COMPLETE marker is needed because a directory rename is atomic on POSIX
//  file systems (local, NFS, Lustre), and a loader verifies sizes and
//  checksums anyway.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "runtime/ckpt/format.h"
#include "core/status.h"

namespace hypertrain::ckpt {

std::string StepDirName(int64_t step);                             // "step-<N>"
std::string TempDirName(int64_t step, const std::string& attempt);  // ".step-<N>.tmp-<attempt>"

struct SaveTarget {
  std::string root;     // exp_manager.checkpoint_dir
  int64_t step = 0;
  std::string attempt = "0";  // identical on all ranks of one run attempt
  int rank = 0;
  int world_size = 1;
  bool writes_shard = true;  // ranks of replica 0
  int shard_rank = 0;
  int shard_degree = 1;
  double coordinator_timeout_s = 600;
  // Set by the owner to make a waiting coordinator give up at once (process
  // shutting down after an error): the save is then abandoned, uncommitted.
  const std::atomic<bool>* cancel = nullptr;
};

// One rank's shard in host memory: per unit its range and the three state
// arrays (range.size() floats each).
struct ShardData {
  std::vector<ElemRange> ranges;
  std::vector<std::array<const float*, kNumStates>> states;
};

struct WriteStats {
  int64_t bytes = 0;
  double seconds = 0;
};

// Step 1 for this rank. `shard` is ignored unless target.writes_shard.
Status WriteRankFiles(const SaveTarget& target, const ShardData* shard, const RankRecord& record,
                      WriteStats* stats = nullptr);

// Best effort after a failed WriteRankFiles: rank-<r>.failed tells the
// coordinator at once (instead of after its timeout) that this save is lost.
void ReportRankFailure(const SaveTarget& target, const Status& error);

// Step 2 (rank 0 only). `base` carries everything but ranks/files, which come
// from the rank files. Returns the committed directory's path.
StatusOr<std::string> CommitCheckpoint(const SaveTarget& target, Manifest base);

// Committed step directories under root, ascending by step.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& root);

// Checks a committed directory: manifest parses and is consistent, each shard
// file exists with its recorded size, its header matches the manifest, and
// (full_checksums) its crc32c matches. A manifest without its own checksum
// is DataLoss unless !full_checksums (exp_manager.checkpoint.verify_checksums:
// false). Returns the manifest, or DataLoss / NotFound naming the reason.
StatusOr<Manifest> VerifyCheckpoint(const std::string& dir, bool full_checksums);
// The same with the shard files' crc32c left out while the manifest's own
// checksum is still required (`manifest_checksum`): a rank of a multi-rank
// run checks only the files it reads, after picking the checkpoint
// (CheckpointReader::VerifyFilesFor), instead of all world-size files.
struct VerifyOptions {
  bool manifest_checksum = true;
  bool file_checksums = true;
};
StatusOr<Manifest> VerifyCheckpoint(const std::string& dir, const VerifyOptions& options);

struct UnusableCheckpoint {
  std::string path;
  Status why;
};
struct FoundCheckpoint {
  std::string path;
  Manifest manifest;
  // Newer checkpoints that failed verification (skipped), newest first.
  std::vector<UnusableCheckpoint> skipped;
};
// Newest checkpoint under root that verifies; every skipped one is logged as a
// warning with its reason. NotFound when root holds no step-N directory (or
// is absent); DataLoss listing each checkpoint and why it is unusable when
// there are some but none verifies (never a silent fresh start: the user
// decides — exp_manager.start_fresh or resume_from_checkpoint).
StatusOr<FoundCheckpoint> FindLatestCheckpoint(const std::string& root, bool full_checksums);
StatusOr<FoundCheckpoint> FindLatestCheckpoint(const std::string& root, const VerifyOptions& options);

// Moves a checkpoint directory that failed verification (or is being
// replaced) out of the way without deleting it: <dir>.<tag>-<UTC time>,
// e.g. step-40.corrupt-20261125T213000Z. Names other than step-N are never
// listed, loaded or removed by retention. Returns the new path.
StatusOr<std::string> MoveAside(const std::string& dir, const std::string& tag);

// Removes temporary directories of unfinished saves (".step-*.tmp-*") and
// half-deleted ones (".trash-*"). Rank 0, at start, before any rank saves.
Status CleanStaleTemporaries(const std::string& root);

// Keeps the newest `keep` committed checkpoints (keep < 0: all) and deletes
// older ones (renamed to .trash-* first so a crash never leaves a half-deleted
// step-N). Never deletes `protect` (the one just committed).
Status ApplyRetention(const std::string& root, int keep, int64_t protect_step);

// Reads ranges of a checkpoint into any (new) layout: reshards by mapping each
// tensor by name from the target's unit offsets to the checkpoint's, and
// reading those bytes from whichever old shard files hold them. Elements of
// the target range that belong to no tensor (alignment gaps, padding) are 0.
class CheckpointReader {
 public:
  // `manifest` must come from VerifyCheckpoint(dir).
  static StatusOr<CheckpointReader> Open(const std::string& dir, Manifest manifest);
  CheckpointReader(CheckpointReader&&) noexcept = default;

  const Manifest& manifest() const { return manifest_; }
  // The target layout must hold the same tensors (names, shapes) unit by unit;
  // offsets and padding may differ. InvalidArgument naming the first mismatch.
  Status CheckCompatible(const ModelLayoutDesc& target) const;
  // dst[s][i] = state s of element range.begin + i of target unit `unit`.
  Status ReadRange(const UnitEntry& target_unit, ElemRange range, const std::array<float*, kNumStates>& dst) const;
  // The crc32c of every shard file that ReadRange of `owned(unit)` for each
  // target unit reads (a rank's own file when the layout is unchanged; the
  // files it reshards from otherwise), on up to 4 threads: DataLoss naming
  // the first corrupt file. `*bytes`: the bytes checked.
  Status VerifyFilesFor(const ModelLayoutDesc& target, const std::function<ElemRange(int)>& owned,
                        int64_t* bytes = nullptr) const;
  // Whole tensor of the master weights, by name (for HF export).
  Status ReadTensor(const std::string& name, int state, float* dst) const;

 private:
  CheckpointReader() = default;
  // Reads old-unit elements [r.begin, r.end) of state s into dst.
  Status ReadOld(int unit, ElemRange r, int state, float* dst) const;
  // The old units' ranges that ReadRange(target_unit, range) reads.
  std::vector<ElemRange> OldRangesFor(const UnitEntry& target_unit, ElemRange range) const;
  std::string dir_;
  Manifest manifest_;
  std::vector<Fd> fds_;
  std::vector<ShardHeader> headers_;
};

}  // namespace hypertrain::ckpt
