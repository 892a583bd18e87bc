#include "runtime/kernels/cpu/adamw.h"

#include <cmath>

namespace hypertrain::kernels::cpu {

void AdamW(float* param, const float* grad, float* m, float* v, size_t n,
           const AdamWParams& p) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), p.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), p.step);
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grad[i]) * p.grad_scale;
    const double mi = p.beta1 * static_cast<double>(m[i]) + (1.0 - p.beta1) * g;
    const double vi = p.beta2 * static_cast<double>(v[i]) + (1.0 - p.beta2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    const double update = (mi / bc1) / (std::sqrt(vi / bc2) + p.eps);
    const double w = static_cast<double>(param[i]);
    param[i] = static_cast<float>(w - p.lr * (update + p.weight_decay * w));
  }
}

}  // namespace hypertrain::kernels::cpu
