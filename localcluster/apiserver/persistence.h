// Durable state for the local control plane: snapshot + write-ahead log.
//
// Layout under `dir`: snapshot.json (whole state at some revision, replaced
// atomically: temp file, fsync, rename, fsync dir) and wal.log (one JSON record
// per line, appended and fdatasync'ed before a write is acknowledged). Load()
// reads the snapshot and replays records newer than it; a torn final line (crash
// mid-append) is ignored. Compact() writes a new snapshot and truncates the log.
// Files are written with core/atomic_file.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "core/atomic_file.h"
#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

// resource ("group/plural") -> key ("ns/name") -> object.
using StateMap = std::unordered_map<std::string, std::map<std::string, json>>;

struct LoadedState {
  uint64_t resource_version = 0;
  StateMap objects;
  size_t wal_records = 0;
};

class Persistence {
 public:
  // Creates `dir` if needed and opens the log for appending.
  static StatusOr<std::unique_ptr<Persistence>> Open(const std::string& dir);
  ~Persistence();
  Persistence(const Persistence&) = delete;
  Persistence& operator=(const Persistence&) = delete;

  StatusOr<LoadedState> Load();
  // Appends one record; `object` is ignored for deletes.
  Status AppendPut(uint64_t rv, const std::string& resource, const std::string& key,
                   const json& object);
  Status AppendDelete(uint64_t rv, const std::string& resource, const std::string& key);
  // Snapshot of the full state at `rv`; truncates the log afterwards.
  Status Compact(uint64_t rv, const StateMap& state);

 private:
  explicit Persistence(std::string dir) : dir_(std::move(dir)) {}
  Status Append(const std::string& line);
  Status OpenLog(bool truncate);

  std::string dir_;
  hypertrain::Fd wal_;
};

}  // namespace kubelocal
