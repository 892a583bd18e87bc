#pragma once
// manifest.json of a prepared token directory (`hypertrain prepare`): which
// tokenizer made the ids, from which inputs, and how many documents and
// tokens each shard holds. The trainer reads it to refuse data made for
// another tokenizer or vocab, and shards the manifest does not list.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::data {

inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kManifestFormat[] = "hypertrain-token-shards";

struct ManifestTokenizer {
  std::string kind;     // "hf" (tokenizer.json) or "bytes" (vocab 256)
  std::string path;     // where it was loaded from (informational)
  std::string sha256;   // of tokenizer.json; empty for "bytes"
  int64_t vocab_size = 0;
  std::optional<int64_t> bos_id, eos_id;
  bool add_bos = false;
  std::string description;
};

struct ManifestInput {
  std::string path;
  std::string format;  // text | jsonl | arrow (+ ".gz")
  int64_t bytes = 0;
  int64_t documents = 0;
  int64_t tokens = 0;
};

struct ManifestShard {
  std::string file;  // relative to the directory
  int64_t tokens = 0;
};

struct DataManifest {
  int version = 1;
  ManifestTokenizer tokenizer;
  std::vector<ManifestInput> inputs;
  std::vector<ManifestShard> shards;
  int bytes_per_token = 2;
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t invalid_utf8 = 0;  // sequences read as U+FFFD
  std::string created;       // RFC 3339

  std::string ToJson() const;
  static StatusOr<DataManifest> Parse(const std::string& json_text, const std::string& source);
};

// Reads dir/manifest.json; std::nullopt when there is none.
StatusOr<std::optional<DataManifest>> ReadManifest(const std::string& dir);

// SHA-256 (hex) of dir/tokenizer.json (or of the file, when given one).
StatusOr<std::string> TokenizerJsonSha256(const std::string& dir_or_file);

// The trainer's check: the manifest's vocab equals the model's, its
// tokenizer is the configured one (when configured), and the directory's
// *.bin files are exactly the listed shards.
Status CheckManifestForModel(const DataManifest& m, const std::string& dir, int64_t model_vocab_size,
                             const std::string& expected_tokenizer_sha256,
                             const std::vector<std::string>& bin_files);

}  // namespace hypertrain::data
