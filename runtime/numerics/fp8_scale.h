#pragma once
// The per-tensor FP8 scale rule, shared by host code (delayed scaling,
// runtime/model/fp8.h) and device kernels (current scaling inside a pass,
// runtime/kernels/cuda/fp8_cast.h), so both compute the same bits.
//
//   q = fp8(x * scale),  x ~= q * scale_inv,  scale_inv = 1 / scale
//   scale = 2^(e - margin), e the largest integer with amax * 2^e <= fp8_max
//
// Scales are powers of two: the cast is an exact rescaling (only the fp8
// rounding loses bits), scale_inv is exact, a dequantized value is exactly
// representable in bf16, and re-casting a dequantized tensor with the same
// (or a larger power-of-two) scale that does not saturate gives back the same
// bytes. The price is up to one bit of range: amax * scale lands in
// (fp8_max / 2, fp8_max] instead of exactly fp8_max (Transformer Engine's
// exact ratio). amax <= 0, inf or NaN leaves the previous scale in place.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define HT_HOST_DEVICE __host__ __device__
#else
#define HT_HOST_DEVICE
#endif

namespace hypertrain::model {

enum class Fp8Format { kE4M3, kE5M2 };

// Largest finite values: e4m3 (OCP "fn": no infinities) and e5m2.
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;
// Scale exponents stay inside normal floats, so scale and scale_inv are both
// exact and finite.
inline constexpr int kFp8MinScaleExp = -125;
inline constexpr int kFp8MaxScaleExp = 125;

HT_HOST_DEVICE inline float Fp8MaxOf(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? kFp8E4M3Max : kFp8E5M2Max;
}

HT_HOST_DEVICE inline float Fp8ScaleFromAmax(float amax, float fp8_max, int margin,
                                             float prev_scale) {
  if (!(amax > 0.0f) || !(amax <= 3.4e38f)) return prev_scale;  // 0, negative, inf, NaN
  int ea = 0, ef = 0;
  const float ma = frexpf(amax, &ea);     // amax = ma * 2^ea, ma in [0.5, 1)
  const float mf = frexpf(fp8_max, &ef);  // fp8_max = mf * 2^ef
  // amax * 2^(ef - ea) = ma * 2^ef: within fp8_max iff ma <= mf.
  int e = ef - ea - (ma > mf ? 1 : 0) - margin;
  e = e < kFp8MinScaleExp ? kFp8MinScaleExp : (e > kFp8MaxScaleExp ? kFp8MaxScaleExp : e);
  return ldexpf(1.0f, e);
}

}  // namespace hypertrain::model
