#pragma once
// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) in C++,
// giving the same ids as HF tokenizers for:
//  - byte-level BPE with a Split regex and ByteLevel (Llama-3, GPT-2 family);
//  - SentencePiece-style BPE with Prepend/Replace normalizers or Metaspace,
//    "▁" and byte fallback (Llama-2, Mistral family).
// A model, normalizer, pre-tokenizer, post-processor or decoder type it cannot
// run is InvalidArgument naming the type (WordPiece, Unigram, NFKC, ...).
//
// Encode: added tokens (<|begin_of_text|>, <s>, ...) are cut out of the text
// first (when parse_special); the text between them is normalized,
// pre-tokenized and run through the model; add_special applies the
// post-processor's template (e.g. Llama-2's leading <s>). Invalid UTF-8 in
// the input is read as U+FFFD per bad sequence (as Python's "replace").
//
// Decode: ids -> token strings -> decoder (HF tokenizers' decode, without
// transformers' clean_up_tokenization_spaces).
//
// Thread-safe after construction: one Tokenizer serves all threads.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/data/tokenizer/added_tokens.h"

namespace hypertrain::tokenizer {

class BpeModel;
class Normalizer;
class PreTokenizer;
class PostProcessor;
class Decoder;

struct EncodeOptions {
  bool add_special = true;    // the post-processor's template (BOS/EOS)
  bool parse_special = true;  // match added tokens in the text (false: plain text)
};

struct DecodeOptions {
  bool skip_special = false;  // drop special added tokens
};

class Tokenizer {
 public:
  // dir holds tokenizer.json and, optionally, tokenizer_config.json.
  static StatusOr<std::unique_ptr<Tokenizer>> FromDir(const std::string& dir);
  // The two files' contents (config may be empty); source names them in errors.
  static StatusOr<std::unique_ptr<Tokenizer>> FromJson(const std::string& tokenizer_json,
                                                       const std::string& config_json,
                                                       const std::string& source);
  ~Tokenizer();

  StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Appends the ids of text to *out (no allocation of a result vector).
  Status EncodeTo(std::string_view text, const EncodeOptions& options, std::vector<int32_t>* out) const;
  StatusOr<std::string> Decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // Added tokens first, then the model's vocab.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // 1 + the largest id (model vocab and added tokens): the embedding rows a
  // model needs (128256 for Llama-3, 32000 for Llama-2).
  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }

  // From tokenizer_config.json (bos_token / eos_token / pad_token / unk_token).
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  std::optional<int32_t> pad_id() const { return pad_id_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  // Whether a document starts with BOS / ends with EOS by this tokenizer's
  // own rule: tokenizer_config.json's add_bos_token / add_eos_token when set,
  // else whether the post-processor's template puts them there.
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  // SHA-256 (hex) of tokenizer.json: names the tokenizer in data manifests.
  const std::string& sha256() const { return sha256_; }
  // One line: model kind, vocab size, special tokens.
  std::string Describe() const;

 private:
  Tokenizer();
  // One span between raw added tokens: normalize, cut normalized added
  // tokens, encode the rest.
  Status EncodeSegment(std::string_view text, bool first_section, bool parse_special,
                       std::vector<int32_t>* out) const;
  // Pre-tokenize and run the model.
  Status EncodePieces(std::string_view text, bool first_section, std::vector<int32_t>* out) const;
  Status LoadConfig(const std::string& config_json, const std::string& source);

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::string decoder_error_;  // set when the decoder type is unsupported
  std::vector<AddedToken> added_;
  std::unique_ptr<AddedTokenMatcher> raw_matcher_;         // normalized: false
  std::unique_ptr<AddedTokenMatcher> normalized_matcher_;  // normalized: true
  std::vector<int32_t> added_by_id_;                       // id -> index in added_, or -1
  std::vector<int32_t> prefix_ids_, suffix_ids_;           // the post-processor's template
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_, eos_id_, pad_id_;
  std::string bos_token_, eos_token_;
  bool add_bos_ = false, add_eos_ = false;
  std::string sha256_;
};

}  // namespace hypertrain::tokenizer
