#include "runtime/data/tokenizer/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include <stdexcept>

namespace hypertrain::tokenizer {
namespace {

// Per-thread PCRE2 scratch shared by all patterns: match data (only the
// whole-match offsets are read, so a small ovector does for any pattern) and
// a JIT stack large enough for long whitespace runs.
struct Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  Scratch() {
    data = pcre2_match_data_create(16, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    if (data == nullptr || context == nullptr || stack == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

std::string QuoteMeta(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Regex>> Regex::Compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    return InvalidArgument(fmt::format("tokenizer regex /{}/ does not compile at offset {}: {}",
                                       pattern, offset, Pcre2Message(err)));
  }
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = pattern;
  re->code_ = code;
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return re;
}

StatusOr<std::unique_ptr<Regex>> Regex::Literal(const std::string& text) {
  if (text.empty()) return InvalidArgument("tokenizer: an empty string pattern matches nothing");
  return Compile(QuoteMeta(text));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::Find(std::string_view text, size_t start, size_t* begin, size_t* end) const {
  if (start > text.size()) return false;
  Scratch& s = ThreadScratch();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                        s.data, s.context)
                      : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, s.data,
                                    s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    // Resource limits only (the pattern compiled and the text is valid):
    // a bug or an absurd input, never silently a wrong split.
    throw std::runtime_error(fmt::format("tokenizer regex /{}/ failed at offset {}: {}", pattern_,
                                         start, Pcre2Message(rc)));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  *begin = ov[0];
  *end = ov[1];
  return true;
}

}  // namespace hypertrain::tokenizer
