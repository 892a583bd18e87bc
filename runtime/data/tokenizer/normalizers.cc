// Normalizers of tokenizer.json: Sequence, Prepend, Replace, Strip.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer/pipeline.h"
#include "runtime/data/tokenizer/regex.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> s) : stages_(std::move(s)) {}
  void Normalize(std::string* text) const override {
    for (const auto& s : stages_) s->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> stages_;
};

// Prepends a string to non-empty text (SentencePiece's "▁" before the text).
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prepend_(std::move(p)) {}
  void Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

// Replaces every match of a literal string or a regex.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void Normalize(std::string* text) const override {
    if (regex_ == nullptr) {
      ReplaceLiteral(text);
      return;
    }
    std::string out;
    size_t pos = 0, b, e;
    while (pos <= text->size() && regex_->Find(*text, pos, &b, &e)) {
      out.append(*text, pos, b - pos);
      out.append(content_);
      if (e == b) {  // empty match: keep one character and move on
        if (b >= text->size()) {
          pos = text->size();
          break;
        }
        out.push_back((*text)[b]);
        e = b + 1;
      }
      pos = e;
    }
    if (pos < text->size()) out.append(*text, pos, std::string::npos);
    *text = std::move(out);
  }

 private:
  void ReplaceLiteral(std::string* text) const {
    if (literal_.size() == 1 && content_.size() >= 1) {
      // Common case (" " -> "▁"): one pass with a reserved output.
      const char c = literal_[0];
      size_t count = 0;
      for (char x : *text) count += x == c;
      if (count == 0) return;
      std::string out;
      out.reserve(text->size() + count * (content_.size() - 1));
      for (char x : *text) {
        if (x == c) out.append(content_);
        else out.push_back(x);
      }
      *text = std::move(out);
      return;
    }
    std::string out;
    size_t pos = 0;
    for (size_t f = text->find(literal_); f != std::string::npos; f = text->find(literal_, pos)) {
      out.append(*text, pos, f - pos);
      out.append(content_);
      pos = f + literal_.size();
    }
    if (pos == 0) return;
    out.append(*text, pos, std::string::npos);
    *text = std::move(out);
  }

  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(std::unique_ptr<Regex> left, std::unique_ptr<Regex> right)
      : left_(std::move(left)), right_(std::move(right)) {}
  void Normalize(std::string* text) const override {
    size_t b, e;
    if (right_ && right_->Find(*text, 0, &b, &e)) text->erase(b);
    if (left_ && left_->Find(*text, 0, &b, &e)) text->erase(0, e);
  }

 private:
  std::unique_ptr<Regex> left_, right_;
};

}  // namespace

// Reads {"String": s} or {"Regex": r} patterns (Replace, Split).
StatusOr<std::unique_ptr<Regex>> PatternFromJson(const json& j, const char* where, std::string* literal) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    *literal = j["String"].get<std::string>();
    return Regex::Literal(*literal);
  }
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    literal->clear();
    return Regex::Compile(j["Regex"].get<std::string>());
  }
  return InvalidArgument(fmt::format("tokenizer: {} pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}",
                                     where, j.dump()));
}

StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const json& j) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> stages;
    for (const json& s : j.value("normalizers", json::array())) {
      HT_ASSIGN_OR_RETURN(auto n, MakeNormalizer(s));
      if (n) stages.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(stages)));
  }
  if (type == "Prepend") {
    return std::unique_ptr<Normalizer>(new PrependNormalizer(j.value("prepend", "")));
  }
  if (type == "Replace") {
    std::string literal;
    HT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, PatternFromJson(j.value("pattern", json()), "Replace", &literal));
    if (!literal.empty()) re.reset();  // literal replacement needs no regex
    return std::unique_ptr<Normalizer>(
        new ReplaceNormalizer(std::move(literal), std::move(re), j.value("content", "")));
  }
  if (type == "Strip") {
    std::unique_ptr<Regex> left, right;
    if (j.value("strip_left", true)) {
      HT_ASSIGN_OR_RETURN(left, Regex::Compile("^\\s+"));
    }
    if (j.value("strip_right", true)) {
      HT_ASSIGN_OR_RETURN(right, Regex::Compile("\\s+\\z"));
    }
    return std::unique_ptr<Normalizer>(new StripNormalizer(std::move(left), std::move(right)));
  }
  return InvalidArgument(fmt::format(
      "tokenizer: normalizer type '{}' is not supported (supported: Sequence, Prepend, Replace, Strip)",
      type.empty() ? j.dump() : type));
}

}  // namespace hypertrain::tokenizer
