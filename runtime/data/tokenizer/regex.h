#pragma once
// A compiled regular expression for the tokenizer's Split pre-tokenizers and
// Replace normalizers: PCRE2 in UTF mode with Unicode properties (\p{L},
// \p{N}; \s \d \w are Unicode-aware, as in the Oniguruma engine of HF
// tokenizers) and JIT compilation. Thread-safe: Find keeps its scratch
// (match data, JIT stack) per thread.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hypertrain::tokenizer {

class Regex {
 public:
  // pattern in the syntax of HF tokenizer.json (Oniguruma/Perl). An invalid
  // pattern is InvalidArgument naming the pattern, the position and why.
  static StatusOr<std::unique_ptr<Regex>> Compile(const std::string& pattern);
  // A literal string to match (tokenizer.json's {"String": ...} patterns).
  static StatusOr<std::unique_ptr<Regex>> Literal(const std::string& text);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first match in text at or after byte offset start; sets
  // [*begin, *end). text must be valid UTF-8 (not re-checked). An empty match
  // is reported as such (callers advance). Returns false when there is none.
  bool Find(std::string_view text, size_t start, size_t* begin, size_t* end) const;

  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code*
  bool jit_ = false;
};

}  // namespace hypertrain::tokenizer
