#pragma once
// Added tokens (tokenizer.json "added_tokens": <|begin_of_text|>, <s>, ...)
// are found in the text before the model sees it, as HF tokenizers does:
// leftmost-longest match; lstrip/rstrip swallow the whitespace beside a
// match; single_word only matches between word boundaries. The text between
// matches goes through the normalizer, pre-tokenizer and model.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;  // matched in normalized text (else in raw text)
};

// One piece of the text: either an added token or a span of plain text.
struct Segment {
  size_t begin = 0, end = 0;  // byte span in the text
  int32_t token = -1;         // added token id, or -1 for plain text
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }

  // Splits text into plain spans and added-token matches (appended to *out,
  // covering text in order; empty plain spans are dropped).
  void Split(std::string_view text, std::vector<Segment>* out) const;

 private:
  // Longest token starting at text[pos] (index into tokens_), or -1.
  int LongestAt(std::string_view text, size_t pos) const;

  struct Node {
    int32_t child_begin = 0;  // children sorted by byte in edges_
    int32_t child_count = 0;
    int32_t token = -1;       // token ending here
  };
  struct Edge {
    unsigned char byte;
    int32_t node;
  };
  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  bool first_byte_[256] = {};
};

}  // namespace hypertrain::tokenizer
