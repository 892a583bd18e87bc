#pragma once
// The stages of an HF tokenizer.json pipeline around the model, each built
// from its JSON object. A type this build cannot run is InvalidArgument
// naming the stage, the type and what is supported.
//
//   text -> normalizer -> pre-tokenizer (pieces) -> model (ids) -> post-processor
//   ids -> tokens -> decoder -> text
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace hypertrain::tokenizer {

class Regex;
// Reads a {"String": s} or {"Regex": r} pattern; *literal holds s (or is
// empty for a regex). where names the stage for errors.
StatusOr<std::unique_ptr<Regex>> PatternFromJson(const nlohmann::json& j, const char* where,
                                                 std::string* literal);

// Rewrites the text of one plain segment (between added tokens).
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string* text) const = 0;
};
// Supported: Sequence, Prepend, Replace, Strip. null -> nullptr.
StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const nlohmann::json& j);

// Splits a segment into pre-tokens. Pieces are views into the segment or into
// strings the stage adds to *arena (stable while the arena lives).
struct PreTokenizeContext {
  bool first_section = true;  // the segment starts the text (Metaspace "first")
  std::deque<std::string>* arena = nullptr;
};
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Status Apply(const PreTokenizeContext& ctx, std::vector<std::string_view>* pieces) const = 0;
  // True when the stage maps bytes to the GPT-2 alphabet (the model then
  // works on raw bytes; see byte_level.h).
  virtual bool byte_level() const { return false; }
};
// Supported: Sequence, Split, ByteLevel, Metaspace, Digits. null -> nullptr.
StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const nlohmann::json& j);

// Adds special tokens around the ids of one sequence (add_special).
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The ids it puts before / after the sequence.
  virtual std::vector<int32_t> Prefix() const = 0;
  virtual std::vector<int32_t> Suffix() const = 0;
};
// Supported: TemplateProcessing, ByteLevel (no ids), Sequence,
// BertProcessing, RobertaProcessing. null -> nullptr.
StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const nlohmann::json& j);

// Turns token strings (as in the vocab) back into text pieces.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};
// Supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip,
// Metaspace. null -> nullptr (tokens are concatenated).
StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const nlohmann::json& j);

}  // namespace hypertrain::tokenizer
