#include "runtime/backends/cuda/packed_segments.h"

#include <fmt/format.h>

namespace hypertrain::cuda {

StatusOr<std::vector<PackedSegment>> PackedSegments(const int32_t* positions, int64_t batch,
                                                    int64_t seq, int64_t heads) {
  std::vector<PackedSegment> out;
  int64_t lse = 0;
  bool all_whole = true;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t* pos = positions + b * seq;
    int64_t start = 0;
    for (int64_t t = 0; t <= seq; ++t) {
      if (t < seq) {
        const int32_t p = pos[t];
        const bool ok = t == 0 ? p == 0 : (p == 0 || p == pos[t - 1] + 1);
        if (!ok) {
          return InvalidArgument(fmt::format(
              "positions[{}][{}] = {}: a packed row's positions must start at 0 and either "
              "continue by 1 or restart at 0",
              b, t, p));
        }
        if (t == 0 || p != 0) continue;
      }
      const int len = static_cast<int>(t - start);  // [start, t) is one sample
      all_whole = all_whole && len == seq;
      out.push_back({static_cast<int>(b * seq + start), len, lse});
      lse = (lse + heads * len + 3) / 4 * 4;  // the next one 16-byte aligned
      start = t;
    }
  }
  if (all_whole) out.clear();
  return out;
}

}  // namespace hypertrain::cuda
