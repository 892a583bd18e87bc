#include "runtime/model/init.h"

#include <algorithm>

namespace hypertrain::model {

void InitUnitParams(const ParamLayout& layout, int unit, uint64_t seed, Range range, float* dst) {
  std::fill(dst, dst + range.size(), 0.0f);
  for (const TensorSlot& t : layout.unit(unit).tensors) {
    const Range r = Intersect(t.range(), range);
    for (int64_t i = r.begin; i < r.end; ++i) {
      dst[i - range.begin] = t.kind == TensorKind::kNorm
                                 ? 1.0f
                                 : kInitStd * NormalAt(seed, static_cast<uint64_t>(unit),
                                                       static_cast<uint64_t>(i));
    }
  }
}

}  // namespace hypertrain::model
