#include "runtime/model/init.h"

#include <algorithm>

namespace hypertrain::model {

std::vector<InitSegment> InitSegments(const ParamLayout& layout, int unit, Range range) {
  std::vector<InitSegment> out;
  for (const TensorSlot& t : layout.unit(unit).tensors) {
    const Range r = Intersect(t.range(), range);
    if (r.size() <= 0) continue;
    InitSegment s{r.begin, r.end, InitRule::kZero, 1.0f};
    switch (t.kind) {
      case TensorKind::kNorm: s.rule = InitRule::kOne; break;
      case TensorKind::kLoraB: s.rule = InitRule::kZero; break;
      case TensorKind::kLoraA:
        s.rule = InitRule::kUniformScaled;
        s.divisor = std::sqrt(static_cast<float>(t.shape[1]));
        break;
      case TensorKind::kEmbedding:
      case TensorKind::kLinear: s.rule = InitRule::kNormal; break;
    }
    out.push_back(s);
  }
  return out;
}

void InitUnitParams(const ParamLayout& layout, int unit, uint64_t seed, Range range, float* dst) {
  std::fill(dst, dst + range.size(), 0.0f);
  const uint64_t u = static_cast<uint64_t>(unit);
  for (const InitSegment& s : InitSegments(layout, unit, range)) {
    for (int64_t i = s.begin; i < s.end; ++i) {
      dst[i - range.begin] = InitValueAt(s.rule, s.divisor, seed, u, static_cast<uint64_t>(i));
    }
  }
}

}  // namespace hypertrain::model
