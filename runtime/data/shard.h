#pragma once
// Token shards: memory-mapped binary files of token ids.
//
// File layout (little-endian), 64-byte header then the tokens:
//   offset  size  field
//   0       8     magic "HTTOKENS"
//   8       4     uint32 version (= 1)
//   12      4     uint32 bytes per token: 2 (uint16 ids) or 4 (uint32 ids)
//   16      8     uint64 num_tokens
//   24      4     uint32 vocab_size the ids were made for (0 = unknown)
//   28      36    zero
//   64      ...   num_tokens ids
// The file size must be exactly 64 + num_tokens * bytes_per_token. Documents
// are concatenated; the byte-level tokenizer (prepare) separates them with
// token 0 (NUL never occurs in text).
//
// Megatron indexed datasets (`name.bin` + `name.idx`, MMIDIDX version 1) are
// also readable: the token stream of all documents in order.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::data {

inline constexpr char kShardMagic[8] = {'H', 'T', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 64;

// A read-only memory-mapped token stream (one shard or one Megatron dataset).
class TokenFile {
 public:
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  // Opens a .bin shard of the format above; DataLoss / NotFound / IoError
  // naming the file and what is wrong (bad magic, version, dtype, size).
  static StatusOr<std::unique_ptr<TokenFile>> OpenShard(const std::string& path);
  // Opens a Megatron dataset given its prefix (path without .bin/.idx).
  static StatusOr<std::unique_ptr<TokenFile>> OpenMegatron(const std::string& prefix);
  // Opens the list-of-integers column (e.g. input_ids) of an Arrow IPC
  // stream file (a Hugging Face save_to_disk shard): its rows concatenated.
  static StatusOr<std::unique_ptr<TokenFile>> OpenArrow(const std::string& path, const std::string& column);

  const std::string& path() const { return path_; }
  int64_t num_tokens() const { return num_tokens_; }
  int bytes_per_token() const { return bytes_per_token_; }
  uint32_t vocab_size() const { return vocab_size_; }
  // Copies tokens [begin, begin + n) into out (as int32; an id that does not
  // fit reads as -1, which the loader reports).
  void Read(int64_t begin, int64_t n, int32_t* out) const;

 private:
  TokenFile() = default;
  // Arrow: the stream is several runs of values (one per record batch).
  struct Segment {
    const uint8_t* values;
    int64_t start;  // first stream position
    int64_t n;
    int width;      // bytes per value
    bool is_signed;
  };
  std::vector<Segment> segments_;
  void ReadSegments(int64_t begin, int64_t n, int32_t* out) const;
  std::shared_ptr<void> owner_;  // keeps the Arrow mapping alive
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint8_t* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
  int bytes_per_token_ = 2;
  uint32_t vocab_size_ = 0;
};

// Writes a shard atomically (temp file, fsync, rename). bytes_per_token 2
// requires every id < 65536.
Status WriteShard(const std::string& path, const std::vector<uint32_t>& tokens,
                  int bytes_per_token, uint32_t vocab_size);

// Byte-level tokenizer: each byte b of the text becomes token b (vocab 256).
// Documents (files) are separated by token 0.
std::vector<uint32_t> ByteTokenize(const std::string& text);

// `hypertrain prepare`: tokenizes text files into shards of at most
// tokens_per_shard tokens, written as out_dir/shard_00000.bin, ... Returns
// the number of tokens written.
StatusOr<int64_t> PrepareByteShards(const std::vector<std::string>& inputs,
                                    const std::string& out_dir, int64_t tokens_per_shard);

}  // namespace hypertrain::data
