// Pre-tokenizers of tokenizer.json: Sequence, Split, ByteLevel, Metaspace,
// Digits, Whitespace, WhitespaceSplit.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer/pipeline.h"
#include "runtime/data/tokenizer/regex.h"
#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

constexpr char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool match;
};

// The matches of re in text and the gaps between them, in order (empty
// matches are skipped, as they produce no piece).
void FindSpans(const Regex& re, std::string_view text, bool invert, std::vector<Span>* spans) {
  spans->clear();
  size_t pos = 0, prev = 0, b, e;
  while (pos < text.size() && re.Find(text, pos, &b, &e)) {
    if (e == b) {
      pos = b + Utf8CharLength(text.data() + b, text.size() - b);
      continue;
    }
    if (b > prev) spans->push_back({prev, b, invert});
    spans->push_back({b, e, !invert});
    prev = pos = e;
  }
  if (prev < text.size()) spans->push_back({prev, text.size(), invert});
}

// Splits every piece by the spans of re, per HF's SplitDelimiterBehavior.
void SplitPieces(const Regex& re, Behavior behavior, bool invert, std::vector<std::string_view>* pieces) {
  thread_local std::vector<Span> spans;
  thread_local std::vector<Span> merged;
  std::vector<std::string_view> out;
  out.reserve(pieces->size() * 2);
  for (std::string_view piece : *pieces) {
    FindSpans(re, piece, invert, &spans);
    merged.clear();
    switch (behavior) {
      case Behavior::kRemoved:
        for (const Span& s : spans) if (!s.match) merged.push_back(s);
        break;
      case Behavior::kIsolated:
        merged = spans;
        break;
      case Behavior::kMergedWithPrevious: {
        bool prev_match = false;
        for (const Span& s : spans) {
          if (s.match && !prev_match && !merged.empty()) merged.back().end = s.end;
          else merged.push_back(s);
          prev_match = s.match;
        }
        break;
      }
      case Behavior::kMergedWithNext: {
        bool prev_match = false;
        for (size_t i = spans.size(); i-- > 0;) {
          const Span& s = spans[i];
          if (s.match && !prev_match && !merged.empty()) merged.back().begin = s.begin;
          else merged.push_back(s);
          prev_match = s.match;
        }
        std::reverse(merged.begin(), merged.end());
        break;
      }
      case Behavior::kContiguous: {
        bool prev_match = false;
        for (const Span& s : spans) {
          if (s.match && prev_match) merged.back().end = s.end;
          else merged.push_back(s);
          prev_match = s.match;
        }
        break;
      }
    }
    for (const Span& s : merged) {
      if (s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
    }
  }
  *pieces = std::move(out);
}

StatusOr<Behavior> ParseBehavior(const json& j) {
  const std::string b = j.is_string() ? j.get<std::string>() : "";
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return InvalidArgument(fmt::format("tokenizer: Split behavior {} is not one of Removed, Isolated, "
                                     "MergedWithPrevious, MergedWithNext, Contiguous", j.dump()));
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> s) : stages_(std::move(s)) {}
  Status Apply(const PreTokenizeContext& ctx, std::vector<std::string_view>* pieces) const override {
    for (const auto& s : stages_) HT_RETURN_IF_ERROR(s->Apply(ctx, pieces));
    return Status::Ok();
  }
  bool byte_level() const override {
    for (const auto& s : stages_) if (s->byte_level()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> re, Behavior b, bool invert)
      : re_(std::move(re)), behavior_(b), invert_(invert) {}
  Status Apply(const PreTokenizeContext&, std::vector<std::string_view>* pieces) const override {
    SplitPieces(*re_, behavior_, invert_, pieces);
    return Status::Ok();
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior behavior_;
  bool invert_;
};

// Maps bytes to the GPT-2 alphabet. The model works on raw bytes, so only the
// optional prefix space and the optional GPT-2 regex split remain here.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  Status Apply(const PreTokenizeContext& ctx, std::vector<std::string_view>* pieces) const override {
    if (add_prefix_space_) {
      for (std::string_view& p : *pieces) {
        if (!p.empty() && p[0] != ' ') p = ctx.arena->emplace_back(" " + std::string(p));
      }
    }
    if (re_) SplitPieces(*re_, Behavior::kIsolated, false, pieces);
    return Status::Ok();
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

// SentencePiece's metaspace: spaces become the replacement ("▁"), which is
// also prepended (always / first segment only / never); split cuts before
// every replacement.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, std::unique_ptr<Regex> split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(std::move(split)) {}
  Status Apply(const PreTokenizeContext& ctx, std::vector<std::string_view>* pieces) const override {
    for (size_t i = 0; i < pieces->size(); ++i) {
      std::string s;
      s.reserve((*pieces)[i].size() + 8);
      for (char c : (*pieces)[i]) {
        if (c == ' ') s.append(replacement_);
        else s.push_back(c);
      }
      const bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && ctx.first_section && i == 0))) {
        s.insert(0, replacement_);
      }
      (*pieces)[i] = ctx.arena->emplace_back(std::move(s));
    }
    if (split_) SplitPieces(*split_, Behavior::kMergedWithNext, false, pieces);
    return Status::Ok();
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  std::unique_ptr<Regex> split_;
};

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const json& j) {
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (j.is_null()) return Ptr();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    std::vector<Ptr> stages;
    for (const json& s : j.value("pretokenizers", json::array())) {
      HT_ASSIGN_OR_RETURN(Ptr p, MakePreTokenizer(s));
      if (p) stages.push_back(std::move(p));
    }
    return Ptr(new SequencePreTokenizer(std::move(stages)));
  }
  if (type == "Split") {
    std::string literal;
    HT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, PatternFromJson(j.value("pattern", json()), "Split", &literal));
    HT_ASSIGN_OR_RETURN(Behavior b, ParseBehavior(j.value("behavior", json())));
    return Ptr(new SplitPreTokenizer(std::move(re), b, j.value("invert", false)));
  }
  if (type == "ByteLevel") {
    std::unique_ptr<Regex> re;
    if (j.value("use_regex", true)) {
      HT_ASSIGN_OR_RETURN(re, Regex::Compile(kGpt2Pattern));
    }
    return Ptr(new ByteLevelPreTokenizer(j.value("add_prefix_space", true), std::move(re)));
  }
  if (type == "Metaspace") {
    const std::string replacement = j.value("replacement", "\xE2\x96\x81");
    MetaspacePreTokenizer::Prepend prepend = MetaspacePreTokenizer::Prepend::kAlways;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "first") prepend = MetaspacePreTokenizer::Prepend::kFirst;
      else if (s == "never") prepend = MetaspacePreTokenizer::Prepend::kNever;
      else if (s != "always") {
        return InvalidArgument(fmt::format("tokenizer: Metaspace prepend_scheme '{}' is not always, first or never", s));
      }
    } else if (j.contains("add_prefix_space") && !j.value("add_prefix_space", true)) {
      prepend = MetaspacePreTokenizer::Prepend::kNever;
    }
    std::unique_ptr<Regex> split;
    if (j.value("split", true)) {
      HT_ASSIGN_OR_RETURN(split, Regex::Literal(replacement));
    }
    return Ptr(new MetaspacePreTokenizer(replacement, prepend, std::move(split)));
  }
  if (type == "Digits") {
    HT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re,
                        Regex::Compile(j.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+"));
    return Ptr(new SplitPreTokenizer(std::move(re), Behavior::kIsolated, false));
  }
  if (type == "Whitespace" || type == "WhitespaceSplit") {
    // Keep the matches only: inverted spans, gaps removed.
    HT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re,
                        Regex::Compile(type == "Whitespace" ? "\\w+|[^\\w\\s]+" : "\\S+"));
    return Ptr(new SplitPreTokenizer(std::move(re), Behavior::kRemoved, true));
  }
  return InvalidArgument(fmt::format(
      "tokenizer: pre-tokenizer type '{}' is not supported (supported: Sequence, Split, ByteLevel, "
      "Metaspace, Digits, Whitespace, WhitespaceSplit)",
      type.empty() ? j.dump() : type));
}

}  // namespace hypertrain::tokenizer
