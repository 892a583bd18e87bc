#include "runtime/data/sft/chat.h"

#include <fmt/format.h>

#include <algorithm>


namespace hypertrain::data::sft {
namespace {

using json = nlohmann::json;

bool PySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Decodes one UTF-8 code point at s[i] (invalid bytes count as one non-space).
uint32_t CodePointAt(const std::string& s, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *len = static_cast<size_t>(n);
  return cp;
}

}  // namespace

const char* ChatFormatName(ChatFormat f) {
  switch (f) {
    case ChatFormat::kLlama3: return "llama3";
    case ChatFormat::kLlama2: return "llama2";
    case ChatFormat::kNone: return "none";
  }
  return "?";
}

StatusOr<ChatFormat> ParseChatFormat(const std::string& s) {
  if (s == "llama3") return ChatFormat::kLlama3;
  if (s == "llama2") return ChatFormat::kLlama2;
  if (s == "none") return ChatFormat::kNone;
  return InvalidArgument(fmt::format("--chat-format: '{}' is not one of llama3, llama2, none", s));
}

std::string PyStrip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t n;
    if (!PySpace(CodePointAt(s, b, &n))) break;
    b += n;
  }
  while (e > b) {
    size_t k = e - 1;  // back to the start of the last code point
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    size_t n;
    if (!PySpace(CodePointAt(s, k, &n)) || k + n != e) break;
    e = k;
  }
  return s.substr(b, e - b);
}

StatusOr<std::vector<Message>> MessagesFromJson(const json& line) {
  std::vector<Message> out;
  if (!line.is_object()) return InvalidArgument("a line must be a JSON object");
  if (line.contains("messages")) {
    const json& ms = line["messages"];
    if (!ms.is_array() || ms.empty()) return InvalidArgument("\"messages\" must be a non-empty list");
    for (size_t i = 0; i < ms.size(); ++i) {
      const json& m = ms[i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !m["content"].is_string()) {
        return InvalidArgument(fmt::format(
            "messages[{}] must be an object with string \"role\" and \"content\"", i));
      }
      Message x{m["role"].get<std::string>(), m["content"].get<std::string>()};
      if (x.role != "system" && x.role != "user" && x.role != "assistant") {
        return InvalidArgument(fmt::format("messages[{}].role '{}' is not system, user or assistant", i, x.role));
      }
      out.push_back(std::move(x));
    }
  } else if (line.contains("prompt") && line.contains("completion")) {
    if (!line["prompt"].is_string() || !line["completion"].is_string()) {
      return InvalidArgument("\"prompt\" and \"completion\" must be strings");
    }
    out.push_back({"user", line["prompt"].get<std::string>()});
    out.push_back({"assistant", line["completion"].get<std::string>()});
  } else {
    return InvalidArgument("a line needs \"messages\" or both \"prompt\" and \"completion\"");
  }
  if (std::none_of(out.begin(), out.end(), [](const Message& m) { return m.role == "assistant"; })) {
    return InvalidArgument("no assistant turn: nothing to learn from");
  }
  return out;
}

StatusOr<std::vector<Segment>> Render(ChatFormat f, const std::vector<Message>& ms,
                                      const std::string& bos, const std::string& eos) {
  std::vector<Segment> out;
  auto add = [&](std::string text, bool target) {
    if (!out.empty() && out.back().target == target) {
      out.back().text += text;
    } else {
      out.push_back({std::move(text), target});
    }
  };
  switch (f) {
    case ChatFormat::kLlama3:
      for (size_t i = 0; i < ms.size(); ++i) {
        add((i == 0 ? bos : "") + "<|start_header_id|>" + ms[i].role + "<|end_header_id|>\n\n", false);
        add(PyStrip(ms[i].content) + "<|eot_id|>", ms[i].role == "assistant");
      }
      return out;
    case ChatFormat::kLlama2: {
      size_t first = 0;
      std::string system;
      bool has_system = false;
      if (!ms.empty() && ms[0].role == "system") {
        system = ms[0].content;
        has_system = true;
        first = 1;
      }
      for (size_t i = first; i < ms.size(); ++i) {
        const size_t k = i - first;
        if ((ms[i].role == "user") != (k % 2 == 0)) {
          return InvalidArgument("llama2 chat format: roles must alternate user/assistant/user/...");
        }
        std::string content = ms[i].content;
        if (k == 0 && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
        if (ms[i].role == "user") {
          add(bos + "[INST] " + PyStrip(content) + " [/INST]", false);
        } else {
          add(" " + PyStrip(content) + " " + eos, true);
        }
      }
      return out;
    }
    case ChatFormat::kNone: {
      if (ms.size() != 2 || ms[0].role != "user" || ms[1].role != "assistant") {
        return InvalidArgument("--chat-format none takes prompt/completion lines (or one user and one "
                               "assistant message)");
      }
      add(bos + ms[0].content, false);
      add(ms[1].content + eos, true);
      return out;
    }
  }
  return Internal("unknown chat format");
}

StatusOr<std::string> RenderForGeneration(ChatFormat f, const std::vector<Message>& ms,
                                          const std::string& bos, const std::string& eos) {
  HT_ASSIGN_OR_RETURN(std::vector<Segment> segs, Render(f, ms, bos, eos));
  std::string s;
  for (const Segment& g : segs) s += g.text;
  if (f == ChatFormat::kLlama3) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return s;
}

StatusOr<Sample> Tokenize(const tokenizer::Tokenizer& tok, const std::vector<Segment>& segments) {
  tokenizer::EncodeOptions o;
  o.add_special = false;
  o.parse_special = true;
  std::string text;
  std::vector<size_t> ends;
  for (const Segment& g : segments) {
    text += g.text;
    ends.push_back(text.size());
  }
  Sample s;
  HT_ASSIGN_OR_RETURN(s.ids, tok.Encode(text, o));
  s.target.assign(s.ids.size(), 0);
  size_t begin = 0;  // first id of the current segment
  for (size_t k = 0; k < segments.size(); ++k) {
    size_t end = s.ids.size();
    if (k + 1 < segments.size()) {
      HT_ASSIGN_OR_RETURN(std::vector<int32_t> prefix,
                          tok.Encode(std::string_view(text).substr(0, ends[k]), o));
      // Ids shared with the whole text belong to the segments so far.
      end = 0;
      while (end < prefix.size() && end < s.ids.size() && prefix[end] == s.ids[end]) ++end;
      if (end < prefix.size()) end = std::min(end, s.ids.size());  // merged across: later segment
      end = std::max(end, begin);
    }
    for (size_t i = begin; i < end; ++i) s.target[i] = segments[k].target ? 1 : 0;
    begin = end;
  }
  return s;
}

}  // namespace hypertrain::data::sft
