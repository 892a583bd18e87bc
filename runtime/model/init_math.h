#pragma once
// The per-element math of parameter initialisation (init.h), written so the
// host and the device compute the same bits: the counter hash is integer math,
// and the normal sample's log and cos are our own polynomials of correctly
// rounded double adds, multiplies and divides (never the libraries' log/cos,
// which differ by an ulp between glibc and CUDA, nor FMA contractions: device
// code goes through __dadd_rn/__dmul_rn, and host code is built with
// -ffp-contract=off). Dependency-free, so nvcc-compiled kernels can include it
// (define HT_INIT_HOST_DEVICE as __host__ __device__ first). They agree with
// glibc's log/cos to a few double ulps, so the float samples are those of the
// library functions but in rare ties.
#include <cstdint>
#include <cstring>

#include "runtime/numerics/counter_rng.h"

namespace hypertrain::model {
namespace init_math {

HT_INIT_HOST_DEVICE inline double Add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

HT_INIT_HOST_DEVICE inline double Mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

HT_INIT_HOST_DEVICE inline double Div(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

HT_INIT_HOST_DEVICE inline uint64_t Bits(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
#endif
}

HT_INIT_HOST_DEVICE inline double FromBits(uint64_t b) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
#endif
}

HT_INIT_HOST_DEVICE inline double Sqrt(double a) {
#ifdef __CUDA_ARCH__
  return __dsqrt_rn(a);
#else
  return __builtin_sqrt(a);
#endif
}

// Horner: c[0] + z*(c[1] + z*(... c[n-1])).
template <int N>
HT_INIT_HOST_DEVICE inline double Poly(double z, const double (&c)[N]) {
  double p = c[N - 1];
  for (int i = N - 2; i >= 0; --i) p = Add(c[i], Mul(z, p));
  return p;
}

// Natural log of a normal positive x: x = m * 2^e with m in (sqrt(1/2),
// sqrt(2)], log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172.
HT_INIT_HOST_DEVICE inline double Log(double x) {
  const uint64_t bits = Bits(x);
  int e = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
  double m = FromBits((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m = Mul(m, 0.5);  // exact
    ++e;
  }
  const double s = Div(Add(m, -1.0), Add(m, 1.0));
  const double z = Mul(s, s);
  constexpr double kAtanh[] = {0.3333333333333333,  0.2,
                               0.14285714285714285, 0.1111111111111111,
                               0.09090909090909091, 0.07692307692307693,
                               0.06666666666666667, 0.058823529411764705,
                               0.05263157894736842, 0.047619047619047616,
                               0.043478260869565216, 0.04};
  const double two_s = Mul(2.0, s);
  const double log_m = Add(two_s, Mul(two_s, Mul(z, Poly(z, kAtanh))));
  // ln 2 in two parts (the first with trailing zero bits: e * hi is exact).
  const double de = static_cast<double>(e);
  return Add(Mul(de, 6.93147180369123816490e-01), Add(Mul(de, 1.90821492927058770002e-10), log_m));
}

// cos(x) for x in [0, 8): the nearest multiple q of pi/2 taken off in two
// parts (Cody-Waite), then sin or cos of |r| <= pi/4 by Taylor polynomials.
HT_INIT_HOST_DEVICE inline double Cos(double x) {
  const int q = static_cast<int>(Add(Mul(x, 0.6366197723675814), 0.5));
  const double dq = static_cast<double>(q);
  const double r = Add(Add(x, -Mul(dq, 1.57079632673412561417e+00)), -Mul(dq, 6.07710050650619224932e-11));
  const double z = Mul(r, r);
  constexpr double kCos[] = {1.0,
                             -0.5,
                             0.041666666666666664,
                             -0.001388888888888889,
                             2.48015873015873e-05,
                             -2.755731922398589e-07,
                             2.08767569878681e-09,
                             -1.1470745597729725e-11,
                             4.779477332387385e-14,
                             -1.5619206968586225e-16,
                             4.110317623312165e-19};
  constexpr double kSin[] = {1.0,
                             -0.16666666666666666,
                             0.008333333333333333,
                             -0.0001984126984126984,
                             2.7557319223985893e-06,
                             -2.505210838544172e-08,
                             1.6059043836821613e-10,
                             -7.647163731819816e-13,
                             2.8114572543455206e-15};
  switch (q & 3) {
    case 0: return Poly(z, kCos);
    case 1: return -Mul(r, Poly(z, kSin));
    case 2: return -Poly(z, kCos);
    default: return Mul(r, Poly(z, kSin));
  }
}

HT_INIT_HOST_DEVICE inline uint64_t Hash(uint64_t seed, uint64_t unit, uint64_t index) {
  return SplitMix64(SplitMix64(seed ^ (unit * 0xD1B54A32D192ED03ull)) + index);
}

}  // namespace init_math

// Standard normal sample for counter (seed, unit, index) via Box-Muller.
HT_INIT_HOST_DEVICE inline float NormalAt(uint64_t seed, uint64_t unit, uint64_t index) {
  using namespace init_math;
  const uint64_t h = Hash(seed, unit, index);
  const double u1 = Div(static_cast<double>(h >> 40) + 1.0, 16777217.0);  // (0, 1]
  const double u2 = Div(static_cast<double>(h & 0xFFFFFF), 16777216.0);   // [0, 1)
  return static_cast<float>(Mul(Sqrt(Mul(-2.0, Log(u1))), Cos(Mul(6.283185307179586, u2))));
}

// Uniform sample in [-1, 1) for counter (seed, unit, index).
HT_INIT_HOST_DEVICE inline float UniformAt(uint64_t seed, uint64_t unit, uint64_t index) {
  const uint64_t h = init_math::Hash(seed, unit, index);
  return static_cast<float>(
      init_math::Add(init_math::Mul(static_cast<double>(h >> 11), 2.0 / 9007199254740992.0), -1.0));
}

inline constexpr float kInitStd = 0.02f;

// How the elements of one tensor start (init.h): 0, 1, kInitStd * N(0, 1), or
// U(-1, 1) / divisor (the divisor sqrt(in), rounded to float by the caller).
enum class InitRule : int { kZero = 0, kOne = 1, kNormal = 2, kUniformScaled = 3 };

// One tensor of a unit as the initialiser sees it: unit elements [begin, end)
// follow `rule` (gaps between tensors are zero). model::InitSegments.
struct InitSegment {
  int64_t begin = 0;
  int64_t end = 0;
  InitRule rule = InitRule::kZero;
  float divisor = 1.0f;  // kUniformScaled only
};

HT_INIT_HOST_DEVICE inline float InitValueAt(InitRule rule, float divisor, uint64_t seed,
                                             uint64_t unit, uint64_t index) {
  switch (rule) {
    case InitRule::kOne: return 1.0f;
    case InitRule::kNormal:
#ifdef __CUDA_ARCH__
      return __fmul_rn(kInitStd, NormalAt(seed, unit, index));
#else
      return kInitStd * NormalAt(seed, unit, index);
#endif
    case InitRule::kUniformScaled:
#ifdef __CUDA_ARCH__
      return __fdiv_rn(UniformAt(seed, unit, index), divisor);
#else
      return UniformAt(seed, unit, index) / divisor;
#endif
    case InitRule::kZero: break;
  }
  return 0.0f;
}

}  // namespace hypertrain::model
