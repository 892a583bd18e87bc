// The FP8 reference codec against the formats' definitions: every code
// round-trips, ties go to even, out-of-range values saturate.
#include "runtime/kernels/cpu/fp8.h"

#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace hypertrain::cpu {
namespace {

using model::Fp8Format;

bool IsNanCode(uint8_t q, Fp8Format f) {
  return std::isnan(Fp8Decode(q, f));
}
bool IsInfCode(uint8_t q, Fp8Format f) { return std::isinf(Fp8Decode(q, f)); }

TEST(Fp8Codec, KnownValues) {
  EXPECT_EQ(Fp8Encode(1.0f, Fp8Format::kE4M3), 0x38);
  EXPECT_EQ(Fp8Encode(-1.0f, Fp8Format::kE4M3), 0xB8);
  EXPECT_EQ(Fp8Encode(448.0f, Fp8Format::kE4M3), 0x7E);
  EXPECT_EQ(Fp8Encode(std::ldexp(1.0f, -9), Fp8Format::kE4M3), 0x01);  // smallest subnormal
  EXPECT_EQ(Fp8Encode(std::ldexp(1.0f, -6), Fp8Format::kE4M3), 0x08);  // smallest normal
  EXPECT_EQ(Fp8Encode(1.0f, Fp8Format::kE5M2), 0x3C);
  EXPECT_EQ(Fp8Encode(57344.0f, Fp8Format::kE5M2), 0x7B);
  EXPECT_EQ(Fp8Encode(std::ldexp(1.0f, -16), Fp8Format::kE5M2), 0x01);
  EXPECT_EQ(Fp8Encode(-0.0f, Fp8Format::kE4M3), 0x80);
  EXPECT_FLOAT_EQ(Fp8Decode(0x7E, Fp8Format::kE4M3), 448.0f);
  EXPECT_FLOAT_EQ(Fp8Decode(0x7B, Fp8Format::kE5M2), 57344.0f);
  EXPECT_TRUE(IsNanCode(0x7F, Fp8Format::kE4M3));
  EXPECT_TRUE(IsNanCode(0xFF, Fp8Format::kE4M3));
  EXPECT_TRUE(IsInfCode(0x7C, Fp8Format::kE5M2));
}

TEST(Fp8Codec, EveryFiniteCodeRoundTrips) {
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    int finite = 0;
    for (int c = 0; c < 256; ++c) {
      const float v = Fp8Decode(static_cast<uint8_t>(c), f);
      if (!std::isfinite(v)) continue;
      ++finite;
      if (v == 0.0f) {
        EXPECT_EQ(Fp8Encode(v, f), c & 0x80) << c;  // +0 / -0 keep their sign
      } else {
        EXPECT_EQ(Fp8Encode(v, f), c) << model::Fp8FormatName(f) << " code " << c << " = " << v;
      }
    }
    EXPECT_EQ(finite, f == Fp8Format::kE4M3 ? 254 : 248);
  }
}

// Midpoints between neighbours go to the one with the even code; anything
// else to the nearer one.
TEST(Fp8Codec, RoundsToNearestTiesToEven) {
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    for (int c = 0; c < 0x7F; ++c) {
      const float lo = Fp8Decode(static_cast<uint8_t>(c), f);
      const float hi = Fp8Decode(static_cast<uint8_t>(c + 1), f);
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      const float mid = 0.5f * (lo + hi);  // exact in fp32
      EXPECT_EQ(Fp8Encode(mid, f), (c % 2 == 0) ? c : c + 1) << "between " << lo << " and " << hi;
      EXPECT_EQ(Fp8Encode(std::nextafter(mid, lo), f), c);
      EXPECT_EQ(Fp8Encode(std::nextafter(mid, hi), f), c + 1);
      EXPECT_EQ(Fp8Encode(-mid, f), 0x80 | ((c % 2 == 0) ? c : c + 1));
    }
  }
}

TEST(Fp8Codec, Saturates) {
  EXPECT_EQ(Fp8Encode(464.0f, Fp8Format::kE4M3), 0x7E);  // the midpoint to 480 (NaN) saturates
  EXPECT_EQ(Fp8Encode(1e6f, Fp8Format::kE4M3), 0x7E);
  EXPECT_EQ(Fp8Encode(-1e6f, Fp8Format::kE4M3), 0xFE);
  EXPECT_EQ(Fp8Encode(INFINITY, Fp8Format::kE4M3), 0x7E);
  EXPECT_EQ(Fp8Encode(-INFINITY, Fp8Format::kE5M2), 0xFB);
  EXPECT_EQ(Fp8Encode(1e9f, Fp8Format::kE5M2), 0x7B);
  EXPECT_TRUE(IsNanCode(Fp8Encode(NAN, Fp8Format::kE4M3), Fp8Format::kE4M3));
  EXPECT_TRUE(IsNanCode(Fp8Encode(NAN, Fp8Format::kE5M2), Fp8Format::kE5M2));
  // Below half the smallest subnormal: zero; exactly half: ties to even (zero).
  EXPECT_EQ(Fp8Encode(std::ldexp(1.0f, -10), Fp8Format::kE4M3), 0x00);
  EXPECT_EQ(Fp8Encode(std::ldexp(1.5f, -10), Fp8Format::kE4M3), 0x01);
}

// Relative error of a cast-dequantize round trip stays within half an ulp of
// the format in its normal range, on random data of many magnitudes.
TEST(Fp8Codec, CastDequantizeErrorBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    std::vector<float> x(4096);
    for (float& v : x) v = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
    const float amax = AbsMax(x.data(), x.size());
    const float scale = model::Fp8ScaleFromAmax(amax, model::Fp8MaxOf(f), 0, 1.0f);
    std::vector<uint8_t> q(x.size());
    EXPECT_EQ(CastToFp8(q.data(), x.data(), x.size(), scale, f), amax);
    std::vector<float> y(x.size());
    Fp8Dequantize(y.data(), q.data(), q.size(), 1.0f / scale, f);
    const int mbits = f == Fp8Format::kE4M3 ? 3 : 2;
    const float min_normal = std::ldexp(1.0f, f == Fp8Format::kE4M3 ? -6 : -14) / scale;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) < min_normal) {
        EXPECT_LE(std::fabs(y[i] - x[i]), std::ldexp(min_normal, -mbits - 1) * 1.0001f);
      } else {
        EXPECT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -mbits - 1) * 1.0001f) << x[i];
      }
    }
  }
}

TEST(Fp8Codec, CastTransposeMatchesCastOfTranspose) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const int rows = 5, cols = 7;
  std::vector<float> x(rows * cols), xt(rows * cols);
  for (float& v : x) v = u(rng);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
  std::vector<uint8_t> a(x.size()), b(x.size());
  const float am = CastTransposeToFp8(a.data(), x.data(), rows, cols, 8.0f, Fp8Format::kE4M3);
  EXPECT_EQ(am, CastToFp8(b.data(), xt.data(), xt.size(), 8.0f, Fp8Format::kE4M3));
  EXPECT_EQ(a, b);
}

// An independent implementation: the host path of CUDA's own conversion
// (cuda_fp8.hpp, what the kernels call on the device), on random floats of
// every magnitude, the formats' exact midpoints and the edges.
TEST(Fp8Codec, AgreesWithCudaHostConversion) {
  std::mt19937 rng(17);
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, 449.0f, 464.0f, 465.0f, 57344.0f, 61440.0f,
                           1e30f, -1e30f, INFINITY, -INFINITY, 1e-30f};
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x) || std::fabs(x) > 1e6f || std::fabs(x) < 1e-8f) {
      x = std::ldexp(static_cast<float>(static_cast<int32_t>(rng() % 2000001) - 1000000) / 1e6f,
                     static_cast<int>(rng() % 40) - 24);
    }
    xs.push_back(x);
  }
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    for (int c = 0; c < 0x7F; ++c) {  // midpoints: the ties
      const float lo = Fp8Decode(static_cast<uint8_t>(c), f), hi = Fp8Decode(static_cast<uint8_t>(c + 1), f);
      if (std::isfinite(lo) && std::isfinite(hi)) xs.push_back(0.5f * (lo + hi));
    }
    const __nv_fp8_interpretation_t interp = f == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
    for (float x : xs) {
      const uint8_t want = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, interp);
      ASSERT_EQ(Fp8Encode(x, f), want) << model::Fp8FormatName(f) << " x=" << x;
      const __half_raw h = __nv_cvt_fp8_to_halfraw(want, interp);
      ASSERT_EQ(Fp8Decode(want, f), static_cast<float>(__half(h))) << int(want);
    }
  }
}

}  // namespace
}  // namespace hypertrain::cpu
