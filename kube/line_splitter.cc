#include "kube/line_splitter.h"

namespace kube {

bool LineSplitter::Feed(std::string_view data,
                        const std::function<bool(std::string_view)>& on_line) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + data.size() > max_) return false;
      partial_.append(data);
      return true;
    }
    std::string_view line;
    if (partial_.empty()) {
      line = data.substr(0, nl);  // fast path: no copy
    } else {
      if (partial_.size() + nl > max_) return false;
      partial_.append(data.substr(0, nl));
      line = partial_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool keep_going = line.empty() || on_line(line);
    partial_.clear();
    data.remove_prefix(nl + 1);
    if (!keep_going) return false;
  }
  return true;
}

}  // namespace kube
