#include "runtime/data/tokenizer/added_tokens.h"

#include <algorithm>
#include <map>

#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

bool IsSpaceByte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Word characters for single_word: ASCII alphanumerics and '_', and any
// non-ASCII character (letters of other scripts).
bool IsWordByte(unsigned char c) { return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  // Build a byte trie: a temporary map-based trie flattened into sorted edges.
  struct TmpNode {
    std::map<unsigned char, int> children;
    int token = -1;
  };
  std::vector<TmpNode> tmp(1);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    first_byte_[static_cast<unsigned char>(s[0])] = true;
    int node = 0;
    for (unsigned char c : s) {
      auto it = tmp[node].children.find(c);
      if (it == tmp[node].children.end()) {
        tmp.push_back({});
        it = tmp[node].children.emplace(c, static_cast<int>(tmp.size()) - 1).first;
      }
      node = it->second;
    }
    tmp[node].token = static_cast<int>(t);  // a later duplicate wins, as in HF
  }
  nodes_.resize(tmp.size());
  for (size_t i = 0; i < tmp.size(); ++i) {
    nodes_[i].token = tmp[i].token;
    nodes_[i].child_begin = static_cast<int32_t>(edges_.size());
    nodes_[i].child_count = static_cast<int32_t>(tmp[i].children.size());
    for (const auto& [c, n] : tmp[i].children) edges_.push_back({c, n});
  }
}

int AddedTokenMatcher::LongestAt(std::string_view text, size_t pos) const {
  int node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const Node& n = nodes_[node];
    const Edge* b = edges_.data() + n.child_begin;
    const Edge* e = b + n.child_count;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const Edge* it = std::lower_bound(b, e, c, [](const Edge& x, unsigned char v) { return x.byte < v; });
    if (it == e || it->byte != c) break;
    node = it->node;
    if (nodes_[node].token >= 0) best = nodes_[node].token;
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<Segment>* out) const {
  size_t plain_begin = 0;  // start of the pending plain span
  size_t pos = 0;
  auto emit_plain = [&](size_t end) {
    if (end > plain_begin) out->push_back({plain_begin, end, -1});
  };
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const int t = LongestAt(text, pos);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[t];
    size_t mb = pos, me = pos + tok.content.size();
    if (tok.single_word) {
      const bool left_ok = mb == 0 || !IsWordByte(static_cast<unsigned char>(text[mb - 1]));
      const bool right_ok = me == text.size() || !IsWordByte(static_cast<unsigned char>(text[me]));
      if (!left_ok || !right_ok) {
        ++pos;
        continue;
      }
    }
    if (tok.lstrip) {
      while (mb > plain_begin && IsSpaceByte(text[mb - 1])) --mb;
    }
    if (tok.rstrip) {
      while (me < text.size() && IsSpaceByte(text[me])) ++me;
    }
    emit_plain(mb);
    out->push_back({mb, me, tok.id});
    plain_begin = pos = me;
  }
  emit_plain(text.size());
}

}  // namespace hypertrain::tokenizer
