#pragma once
// Splits a byte stream into '\n'-terminated lines, whatever the chunking: one
// line may span many pieces and one piece may hold many lines. Lines are
// delivered without the terminator (and without a trailing '\r'); empty
// lines are skipped. A line longer than max_line_bytes is an error.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace kube {

class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line_bytes = 64u << 20) : max_(max_line_bytes) {}
  // Calls on_line for every completed line; returns false if a line exceeded
  // the limit or on_line returned false (the rest of `data` is then dropped).
  bool Feed(std::string_view data, const std::function<bool(std::string_view)>& on_line);
  // Bytes of an incomplete line held back.
  size_t buffered() const { return partial_.size(); }
  void Reset() { partial_.clear(); }

 private:
  size_t max_;
  std::string partial_;
};

}  // namespace kube
