// Decoders of tokenizer.json: Sequence, ByteLevel, Replace, ByteFallback,
// Fuse, Strip, Metaspace.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer/byte_level.h"
#include "runtime/data/tokenizer/pipeline.h"
#include "runtime/data/tokenizer/regex.h"
#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> s) : stages_(std::move(s)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& s : stages_) s->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> stages_;
};

// GPT-2 alphabet back to bytes, all tokens joined; a token with a character
// outside the alphabet (an added token) contributes its own UTF-8 bytes.
class ByteLevelDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes, raw;
    for (const std::string& t : *tokens) {
      if (DecodeByteLevel(t, &raw)) bytes += raw;
      else bytes += t;
    }
    std::string text;
    RepairUtf8(bytes, &text);
    tokens->assign(1, std::move(text));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      std::string out;
      size_t pos = 0, b, e;
      while (pos < t.size() && re_->Find(t, pos, &b, &e) && e > b) {
        out.append(t, pos, b - pos);
        out.append(content_);
        pos = e;
      }
      out.append(t, pos, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::unique_ptr<Regex> re_;
  std::string content_;
};

// Runs of <0xXX> tokens become their bytes: the UTF-8 text when valid, else
// one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    int pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (int i = 0; i < pending_count; ++i) {
          std::string r;
          AppendUtf8(kReplacementChar, &r);
          out.push_back(r);
        }
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& t : *tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        char* end = nullptr;
        const std::string hex = t.substr(3, 2);
        const long v = std::strtol(hex.c_str(), &end, 16);
        if (end == hex.c_str() + 2) byte = static_cast<int>(v);
      }
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    *tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& t : *tokens) all += t;
    tokens->assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character
// from every token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, int start, int stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    const size_t n = content_.size();
    for (std::string& t : *tokens) {
      size_t b = 0, e = t.size();
      for (int i = 0; i < start_ && b + n <= e && t.compare(b, n, content_) == 0; ++i) b += n;
      for (int i = 0; i < stop_ && e >= b + n && t.compare(e - n, n, content_) == 0; ++i) e -= n;
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  int start_, stop_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& t = (*tokens)[i];
      std::string out;
      size_t pos = 0;
      for (size_t f = t.find(replacement_); f != std::string::npos; f = t.find(replacement_, pos)) {
        out.append(t, pos, f - pos);
        out.push_back(' ');
        pos = f + replacement_.size();
      }
      out.append(t, pos, std::string::npos);
      if (i == 0 && strip_first_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
      t = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

}  // namespace

StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const json& j) {
  using Ptr = std::unique_ptr<Decoder>;
  if (j.is_null()) return Ptr();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    std::vector<Ptr> stages;
    for (const json& s : j.value("decoders", json::array())) {
      HT_ASSIGN_OR_RETURN(Ptr d, MakeDecoder(s));
      if (d) stages.push_back(std::move(d));
    }
    return Ptr(new SequenceDecoder(std::move(stages)));
  }
  if (type == "ByteLevel") return Ptr(new ByteLevelDecoder());
  if (type == "Replace") {
    std::string literal;
    HT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, PatternFromJson(j.value("pattern", json()), "Replace decoder", &literal));
    return Ptr(new ReplaceDecoder(std::move(re), j.value("content", "")));
  }
  if (type == "ByteFallback") return Ptr(new ByteFallbackDecoder());
  if (type == "Fuse") return Ptr(new FuseDecoder());
  if (type == "Strip") {
    return Ptr(new StripDecoder(j.value("content", " "), j.value("start", 0), j.value("stop", 0)));
  }
  if (type == "Metaspace") {
    bool strip = j.value("add_prefix_space", true);
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      strip = j["prepend_scheme"].get<std::string>() != "never";
    }
    return Ptr(new MetaspaceDecoder(j.value("replacement", "\xE2\x96\x81"), strip));
  }
  return InvalidArgument(fmt::format(
      "tokenizer: decoder type '{}' is not supported (supported: Sequence, ByteLevel, Replace, "
      "ByteFallback, Fuse, Strip, Metaspace)",
      type.empty() ? j.dump() : type));
}

}  // namespace hypertrain::tokenizer
