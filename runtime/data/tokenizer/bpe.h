#pragma once
// The BPE model of HF tokenizer.json ("model": {"type": "BPE", ...}).
//
// A pre-token is split into initial symbols (bytes for byte-level
// vocabularies, UTF-8 characters otherwise; a character missing from the
// vocab becomes its <0xXX> byte tokens with byte_fallback, else unk), then
// the adjacent pair with the lowest merge rank is merged, leftmost first,
// until no pair has a merge: the result of HF's Word::merge_all. With
// ignore_merges a pre-token that is itself in the vocab is one token.
//
// Thread-safe: results for pre-tokens up to 256 bytes are cached per thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "runtime/data/tokenizer/flat_map.h"

namespace hypertrain::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // model: the "model" object of tokenizer.json. byte_level: the pipeline maps
  // bytes to the GPT-2 alphabet (a ByteLevel pre-tokenizer), so vocab keys
  // are converted to raw bytes and pre-tokens are raw bytes.
  static StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model, bool byte_level);

  // Appends the ids of one pre-token.
  void Encode(std::string_view piece, std::vector<int32_t>* out) const;

  // Vocab entries as written in tokenizer.json (alphabet form).
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }
  const std::string& IdToToken(int32_t id) const { return id_to_token_[id]; }
  std::optional<int32_t> TokenToId(std::string_view token) const;
  bool byte_level() const { return byte_level_; }
  // True when no vocab entry holds "▁" after another character, so text can
  // be cut before every "▁" that follows a non-"▁" without changing the
  // result (SentencePiece-style vocabularies; makes long texts linear).
  bool metaspace_splittable() const { return metaspace_splittable_; }

 private:
  BpeModel() = default;
  // The uncached merge of one pre-token.
  void EncodeUncached(std::string_view piece, std::vector<int32_t>* out) const;
  void InitialSymbols(std::string_view piece, std::vector<int32_t>* ids) const;
  // Merges ids in place: short words by scanning pair ranks, long ones with a
  // heap (both merge the leftmost lowest-rank pair first).
  void MergeShort(std::vector<int32_t>* ids) const;
  void MergeLong(std::vector<int32_t>* ids) const;
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  bool metaspace_splittable_ = false;
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::vector<std::string> id_to_token_;  // alphabet form
  StringMap<int32_t> vocab_;              // internal form (raw bytes if byte_level) -> id
  TokenIndex shown_vocab_;                // alphabet form -> id
  U64Map<Merge> merges_;
  int32_t byte_ids_[256];                 // byte-level: id of each single byte
  int32_t fallback_ids_[256];             // byte_fallback: id of <0xXX>, -1 if absent
  U64Map<int32_t> char_ids_;              // char-level: code point -> id of that one character
  bool plain_symbols_ = false;            // no continuing_subword_prefix / end_of_word_suffix
  uint64_t serial_ = 0;                   // identifies this model in per-thread caches
};

}  // namespace hypertrain::tokenizer
