#pragma once
// Results of kernel autotuning kept across runs, in a file beside the
// checkpoints (<exp_dir>/tune_cache.json), so a restarted job or the next run
// of the same config skips the tuning (cuda.gemm_autotune: seconds per start
// on a cold machine). A cache, never a source of truth: an entry only steers a
// choice among candidates the libraries offer anyway (runtime/kernels/cuda/
// gemm.cc takes a cached algorithm only when the heuristic offers it again,
// so tuning's bit-identical guarantee holds), and a file that is missing,
// unreadable, malformed or written for another context is ignored (and
// replaced on the next save). The file:
//
//   {"format": "hypertrain-tune-cache/1",
//    "context": {"device": "NVIDIA H100 80GB HBM3", "cublaslt": "130100", ...},
//    "entries": {"gemm m=8192 n=2048 ...": "<value>", ...}}
//
// The context names everything a tuned choice depends on besides its key:
// the device and the library versions; an entry's key names the problem
// (shapes, layouts, types, alignment). Not thread-safe (its user locks).
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "core/status.h"

namespace hypertrain::kernels {

class TuneCache {
 public:
  using Context = std::map<std::string, std::string>;

  // The cache at `path` for `context`: its entries when the file exists and
  // was written for exactly this context, else empty; `*note` (optional)
  // says which and why ("3 entries", "none: written for device X").
  static TuneCache Open(std::string path, Context context, std::string* note = nullptr);

  std::optional<std::string> Get(const std::string& key) const;
  void Put(const std::string& key, std::string value);
  size_t size() const { return entries_.size(); }
  const std::string& path() const { return path_; }

  // Writes the file atomically (temporary file, fsync, rename; its folder
  // made if missing) if anything was put since the last save; concurrent
  // savers (ranks of one job) leave one complete file.
  Status Save();

 private:
  std::string path_;
  Context context_;
  std::map<std::string, std::string> entries_;
  bool dirty_ = false;
};

// Lowercase hex of `size` bytes, and back (nullopt unless exactly 2*size
// hex digits): how binary choices (a cuBLASLt algorithm) are stored.
std::string ToHex(const void* data, size_t size);
bool FromHex(const std::string& hex, void* data, size_t size);

}  // namespace hypertrain::kernels
