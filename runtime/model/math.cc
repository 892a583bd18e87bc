#include "runtime/model/math.h"

#include <algorithm>
#include <cmath>

namespace hypertrain::model {

void RopeInvFreq(double* inv_freq, int64_t D, double theta, const RopeScaling& s) {
  for (int64_t i = 0; i < D / 2; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / D);
    if (s.type == RopeScalingType::kLlama3) {
      const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
      const double low_wavelen = old_ctx / s.low_freq_factor;
      const double high_wavelen = old_ctx / s.high_freq_factor;
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;  // low frequency: fully scaled
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }  // high frequency: unchanged
    }
    inv_freq[i] = f;
  }
}

int64_t CountTargets(const int32_t* targets, int64_t N, int32_t ignore_index) {
  int64_t c = 0;
  for (int64_t n = 0; n < N; ++n) c += targets[n] != ignore_index;
  return c;
}

double ClipFactor(double norm, double max_norm) {
  if (max_norm <= 0 || !std::isfinite(norm)) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

}  // namespace hypertrain::model
