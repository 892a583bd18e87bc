#pragma once
// The on-disk checkpoint format (docs/CHECKPOINTS.md):
//
//   <checkpoint_dir>/step-<N>/manifest.json
//   <checkpoint_dir>/step-<N>/shard-<s>-of-<S>.bin   one per shard rank s
//
// A shard file holds, for every unit, the shard's owned element range
// [begin, end) of three fp32 states in this order: master weights, AdamW m,
// AdamW v. Layout: magic "HTSHARD1", u64 little-endian header length, JSON
// header, zero padding to 64 bytes, then per unit the three arrays back to
// back at the header's data_offset (absolute, 64-byte aligned).
//
// The manifest (written last, by rank 0) describes the model layout (units
// and their tensors by HF name), the world layout that wrote it, trainer state
// that is the same on every rank (lr schedule, loss scaler), every rank's
// sampler/RNG state, and for each shard file its size, crc32c and owned
// ranges. Everything a loader needs comes from the manifest; shard headers are
// checked against it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hypertrain::ckpt {

inline constexpr int kNumStates = 3;  // master, adam m, adam v
inline constexpr const char* kStateNames[kNumStates] = {"master", "adam_m", "adam_v"};
inline constexpr int kFormatVersion = 1;
inline constexpr char kShardMagic[9] = "HTSHARD1";
inline constexpr int64_t kDataAlignment = 64;

// [begin, end) in elements of one unit.
struct ElemRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const ElemRange&) const = default;
};
ElemRange IntersectRanges(const ElemRange& a, const ElemRange& b);

struct TensorEntry {
  std::string name;            // HF name
  std::vector<int64_t> shape;  // HF shape
  int64_t offset = 0;          // element offset in its unit
  int64_t numel = 0;
};

struct UnitEntry {
  int index = 0;
  std::string name;  // "embedding", "layers.N"
  int64_t padded_numel = 0;
  std::vector<TensorEntry> tensors;
};

// The flat unit layout of a model (built from model::ParamLayout by
// runtime/ckpt/train_adapter.h, or by tests directly).
struct ModelLayoutDesc {
  std::vector<UnitEntry> units;
  Status Validate() const;  // offsets inside units, no overlaps, numel == prod(shape)
};

struct WorldLayout {
  int nnodes = 1;
  int world_size = 1;
  int shard_degree = 1;    // ranks that split each unit
  int replica_degree = 1;  // copies of each shard (HSDP replicate dim)
  std::string strategy = "none";  // "none", "hsdp", "fsdp", "ddp"
  Status Validate() const;
};

// What one rank contributes to the manifest.
struct RankRecord {
  int rank = 0;
  nlohmann::json sampler;  // opaque to checkpointing
  nlohmann::json rng;      // opaque to checkpointing
};

struct ShardFileRecord {
  std::string name;  // file name inside the step directory
  int shard_rank = 0;
  int64_t bytes = 0;
  uint32_t crc32c = 0;
  std::vector<ElemRange> ranges;  // owned range per unit
};

struct Manifest {
  int version = kFormatVersion;
  int64_t step = 0;
  int64_t tokens_seen = 0;
  std::string config_hash;
  nlohmann::json model_config = nlohmann::json::object();   // e.g. HF config fields
  nlohmann::json trainer_state = nlohmann::json::object();  // lr schedule, loss scaler, ...
  WorldLayout world;
  ModelLayoutDesc layout;
  std::vector<RankRecord> ranks;  // sorted by rank, world.world_size entries
  std::vector<ShardFileRecord> files;  // sorted by shard_rank, world.shard_degree entries
  std::string created_utc;

  nlohmann::json ToJson() const;
  static StatusOr<Manifest> FromJson(const nlohmann::json& j);  // DataLoss naming the field
  // A manifest without its checksum (kManifestChecksumKey) is DataLoss
  // unless `allow_missing_checksum` (checksums off).
  static StatusOr<Manifest> Parse(const std::string& text, bool allow_missing_checksum = false);
  // Structure checks: counts, ranges cover each unit exactly once.
  Status Validate() const;
  const RankRecord* FindRank(int rank) const;
};

// The manifest's own checksum: crc32c (hex) of its JSON without this key,
// keys sorted (nlohmann's dump). Parse() calls a mismatch DataLoss.
inline constexpr char kManifestChecksumKey[] = "manifest_crc32c";
uint32_t ManifestContentCrc32c(const nlohmann::json& manifest);

std::string ShardFileName(int shard_rank, int shard_degree);

// Header of one shard file.
struct ShardHeader {
  int version = kFormatVersion;
  int64_t step = 0;
  int shard_rank = 0;
  int shard_degree = 1;
  struct Unit {
    int unit = 0;
    ElemRange range;
    int64_t data_offset = 0;  // absolute byte offset of the master array
  };
  std::vector<Unit> units;
  // Total file size the header implies.
  int64_t ExpectedFileBytes() const;
};

// Builds a header (data offsets assigned) for the given ranges.
ShardHeader MakeShardHeader(int64_t step, int shard_rank, int shard_degree,
                            const std::vector<ElemRange>& ranges);
// Magic + length + JSON + padding; the first data_offset equals its size.
std::string SerializeShardHeader(const ShardHeader& h);
// Reads and validates the header from an open file.
StatusOr<ShardHeader> ReadShardHeader(int fd, const std::string& path);

// Splits [0, padded_numel) into `parts` contiguous ranges, part p =
// [p*n/parts, (p+1)*n/parts) rounded so every part but the last has the same
// size (what an even sharder does when padded_numel % parts == 0).
ElemRange EvenShard(int64_t padded_numel, int part, int parts);

}  // namespace hypertrain::ckpt
