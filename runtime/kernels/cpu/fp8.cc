#include "runtime/kernels/cpu/fp8.h"

#include <cmath>

namespace hypertrain::cpu {
namespace {

struct Fp8Spec {
  int mantissa_bits;
  int bias;
  int min_normal_exp;  // exponent of the smallest normal
  float max;
  uint8_t nan;
};

Fp8Spec SpecOf(model::Fp8Format f) {
  if (f == model::Fp8Format::kE4M3) return {3, 7, -6, model::kFp8E4M3Max, 0x7F};
  return {2, 15, -14, model::kFp8E5M2Max, 0x7E};
}

}  // namespace

uint8_t Fp8Encode(float x, model::Fp8Format f) {
  const Fp8Spec s = SpecOf(f);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | s.nan;
  double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  if (a > s.max) a = s.max;  // saturate (also +-inf); rounding cannot exceed the max then
  // Quantum of the binade (subnormals share the smallest normal's), then
  // round half to even (nearbyint in the default rounding mode).
  int e = std::ilogb(a);
  if (e < s.min_normal_exp) e = s.min_normal_exp;
  const double quantum = std::ldexp(1.0, e - s.mantissa_bits);
  double r = std::nearbyint(a / quantum) * quantum;
  if (r > s.max) r = s.max;  // saturate (also +-inf)
  if (r == 0.0) return sign;
  int er = std::ilogb(r);
  if (er < s.min_normal_exp) {  // subnormal: exponent field 0
    const int mant = static_cast<int>(std::ldexp(r, s.mantissa_bits - s.min_normal_exp));
    return sign | static_cast<uint8_t>(mant);
  }
  const int mant = static_cast<int>(std::ldexp(r, s.mantissa_bits - er)) - (1 << s.mantissa_bits);
  return sign | static_cast<uint8_t>(((er + s.bias) << s.mantissa_bits) | mant);
}

float Fp8Decode(uint8_t q, model::Fp8Format f) {
  const Fp8Spec s = SpecOf(f);
  const bool neg = q & 0x80;
  const int bits = q & 0x7F;
  const int exp = bits >> s.mantissa_bits, mant = bits & ((1 << s.mantissa_bits) - 1);
  double v = 0.0;
  if (f == model::Fp8Format::kE4M3 && bits == 0x7F) return std::nanf("");
  if (f == model::Fp8Format::kE5M2 && exp == 31) {
    if (mant != 0) return std::nanf("");
    return neg ? -INFINITY : INFINITY;
  }
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), s.min_normal_exp - s.mantissa_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -s.mantissa_bits), exp - s.bias);
  }
  return static_cast<float>(neg ? -v : v);
}

float AbsMax(const float* x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;  // NaN compares false: skipped
  }
  return m;
}

float CastToFp8(uint8_t* q, const float* x, size_t n, float scale, model::Fp8Format f) {
  for (size_t i = 0; i < n; ++i) q[i] = Fp8Encode(x[i] * scale, f);
  return AbsMax(x, n);
}

float CastTransposeToFp8(uint8_t* qt, const float* x, int64_t rows, int64_t cols, float scale,
                         model::Fp8Format f) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) qt[c * rows + r] = Fp8Encode(x[r * cols + c] * scale, f);
  }
  return AbsMax(x, static_cast<size_t>(rows * cols));
}

void Fp8Dequantize(float* y, const uint8_t* q, size_t n, float scale_inv, model::Fp8Format f) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp8Decode(q[i], f) * scale_inv;
}

}  // namespace hypertrain::cpu
