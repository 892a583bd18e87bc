#include "runtime/model/init.h"

#include <algorithm>

namespace hypertrain::model {

void InitUnitParams(const ParamLayout& layout, int unit, uint64_t seed, Range range, float* dst) {
  std::fill(dst, dst + range.size(), 0.0f);
  for (const TensorSlot& t : layout.unit(unit).tensors) {
    const Range r = Intersect(t.range(), range);
    const uint64_t u = static_cast<uint64_t>(unit);
    for (int64_t i = r.begin; i < r.end; ++i) {
      float x = 0.0f;
      switch (t.kind) {
        case TensorKind::kNorm: x = 1.0f; break;
        case TensorKind::kLoraB: x = 0.0f; break;
        case TensorKind::kLoraA:
          x = UniformAt(seed, u, static_cast<uint64_t>(i)) /
              std::sqrt(static_cast<float>(t.shape[1]));
          break;
        case TensorKind::kEmbedding:
        case TensorKind::kLinear:
          x = kInitStd * NormalAt(seed, u, static_cast<uint64_t>(i));
          break;
      }
      dst[i - range.begin] = x;
    }
  }
}

}  // namespace hypertrain::model
