// FP8 casts, amax and scales against the CPU reference (runtime/kernels/
// cpu/fp8.h), bit for bit, on random data spanning the formats' range:
// saturation, subnormals, tails and misaligned (scalar) paths included.
#include "runtime/kernels/cuda/fp8_cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::HostFromF;
using testing::HostToF;

// Normal values times 2^[-12, 8): with a scale fit to the bulk, the tails
// saturate and underflow into subnormals.
template <typename T>
std::vector<T> WideRandom(size_t n, std::mt19937& rng, std::vector<float>* as_float) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> v(n);
  as_float->resize(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = HostFromF<T>(normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 12));
    (*as_float)[i] = HostToF(v[i]);
  }
  return v;
}

float Upload1(DeviceBuffer<float>& d, float v) {
  cudaMemcpy(d.get(), &v, sizeof(float), cudaMemcpyHostToDevice);
  return v;
}
float Download1(const float* d) {
  float v = 0;
  cudaMemcpy(&v, d, sizeof(float), cudaMemcpyDeviceToHost);
  return v;
}

template <typename T>
void CheckCast(size_t n, size_t offset, Fp8Format f, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> xf;
  std::vector<T> hx = WideRandom<T>(n, rng, &xf);
  DeviceBuffer<T> dx(n + offset);
  DeviceBuffer<uint8_t> dq(n + offset);
  DeviceBuffer<float> scale(1), amax(1);
  // A scale that makes the largest values saturate.
  const float s = Upload1(scale, 4.0f * model::Fp8MaxOf(f) / cpu::AbsMax(xf.data(), n));
  // Values that land on the subnormals (and halfway cases between them).
  const float min_sub = std::ldexp(1.0f, f == Fp8Format::kE4M3 ? -9 : -16);
  for (int i = 1; i <= 16; ++i) {
    hx[i * 7] = HostFromF<T>((i % 2 ? -0.5f : 0.5f) * i * min_sub / s);
    xf[i * 7] = HostToF(hx[i * 7]);
  }
  HT_CUDA_ASSERT(cudaMemcpy(dx.get() + offset, hx.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(Fp8Cast<T>(dq.get() + offset, dx.get() + offset, n, scale.get(), amax.get(), f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<uint8_t> want(n);
  const float want_amax = cpu::CastToFp8(want.data(), xf.data(), n, s, f);
  std::vector<uint8_t> got(n);
  HT_CUDA_ASSERT(cudaMemcpy(got.data(), dq.get() + offset, n, cudaMemcpyDeviceToHost));
  size_t bad = 0, saturated = 0, subnormal = 0;
  for (size_t i = 0; i < n; ++i) {
    bad += got[i] != want[i];
    saturated += std::fabs(xf[i] * s) > model::Fp8MaxOf(f);
    subnormal += (want[i] & 0x7F) != 0 && (want[i] & (f == Fp8Format::kE4M3 ? 0x78 : 0x7C)) == 0;
    if (bad == 1 && got[i] != want[i]) ADD_FAILURE() << "first mismatch at " << i << ": x=" << xf[i];
  }
  EXPECT_EQ(bad, 0u) << model::Fp8MaxOf(f) << " n=" << n << " offset=" << offset;
  EXPECT_GT(saturated, 0u) << "the test must exercise saturation";
  EXPECT_GT(subnormal, 0u) << "the test must exercise subnormals";
  EXPECT_EQ(Download1(amax.get()), want_amax);
}

TEST(Fp8Cast, MatchesReferenceBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    CheckCast<__nv_bfloat16>(1 << 20, 0, f, 1);
    CheckCast<__nv_bfloat16>(100003, 0, f, 2);  // tail
    CheckCast<__nv_bfloat16>(70001, 3, f, 3);   // misaligned: scalar path
    CheckCast<float>(65537, 0, f, 4);
  }
}

TEST(Fp8Amax, MatchesReferenceAndAccumulates) {
  HT_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  std::vector<float> xf;
  const size_t n = (1 << 21) + 5;
  auto hx = WideRandom<__nv_bfloat16>(n, rng, &xf);
  hx[n / 3] = HostFromF<__nv_bfloat16>(std::nanf(""));  // skipped, as the reference does
  xf[n / 3] = std::nanf("");
  DeviceBuffer<__nv_bfloat16> dx(n);
  DeviceBuffer<float> amax(1);
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(Fp8Amax(dx.get(), n, amax.get(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const float want = cpu::AbsMax(xf.data(), n);
  EXPECT_EQ(Download1(amax.get()), want);
  // A larger amax already in the slot stays (the slot is a running max).
  Upload1(amax, 2 * want);
  HT_CUDA_ASSERT(Fp8Amax(dx.get(), n, amax.get(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(Download1(amax.get()), 2 * want);
}

template <typename T>
void CheckCastTranspose(int rows, int cols, Fp8Format f, bool with_q, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> xf;
  const size_t n = size_t(rows) * cols;
  const auto hx = WideRandom<T>(n, rng, &xf);
  DeviceBuffer<T> dx(n);
  DeviceBuffer<uint8_t> dq(n), dqt(n);
  DeviceBuffer<float> scale(1), amax(1);
  HT_CUDA_ASSERT(dx.Upload(hx));
  const float s = Upload1(scale, 2.0f * model::Fp8MaxOf(f) / cpu::AbsMax(xf.data(), n));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(Fp8CastTranspose<T>(with_q ? dq.get() : nullptr, dqt.get(), dx.get(), rows, cols,
                                     scale.get(), amax.get(), f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<uint8_t> want_q(n), want_qt(n);
  cpu::CastToFp8(want_q.data(), xf.data(), n, s, f);
  const float want_amax = cpu::CastTransposeToFp8(want_qt.data(), xf.data(), rows, cols, s, f);
  EXPECT_EQ(dqt.Download(), want_qt) << rows << "x" << cols;
  if (with_q) {
    EXPECT_EQ(dq.Download(), want_q) << rows << "x" << cols;
  }
  EXPECT_EQ(Download1(amax.get()), want_amax);
}

TEST(Fp8CastTranspose, MatchesReferenceBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    CheckCastTranspose<__nv_bfloat16>(2048, 768, f, true, 1);  // tiles exactly
    CheckCastTranspose<__nv_bfloat16>(1040, 200, f, false, 2);  // vector path, partial tiles
    CheckCastTranspose<__nv_bfloat16>(100, 37, f, true, 3);     // element path
    CheckCastTranspose<float>(256, 72, f, true, 4);
  }
}

TEST(Fp8Transpose, MatchesHostTranspose) {
  HT_SKIP_WITHOUT_GPU();
  // Tiles exactly, vector path with partial tiles, element path.
  for (auto [rows, cols] : {std::pair{2048, 768}, std::pair{1040, 200}, std::pair{100, 37}}) {
    const size_t n = size_t(rows) * cols;
    std::vector<uint8_t> q(n);
    std::mt19937 rng(rows + cols);
    for (auto& b : q) b = static_cast<uint8_t>(rng());
    DeviceBuffer<uint8_t> dq(n), dqt(n);
    HT_CUDA_ASSERT(dq.Upload(q));
    HT_CUDA_ASSERT(Fp8Transpose(dqt.get(), dq.get(), rows, cols, nullptr));
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    std::vector<uint8_t> want(n);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) want[size_t(c) * rows + r] = q[size_t(r) * cols + c];
    EXPECT_EQ(dqt.Download(), want) << rows << "x" << cols;
  }
}

TEST(Fp8Dequantize, IsExactForPowerOfTwoScales) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const size_t n = 4096;
    std::vector<uint8_t> q(n);
    std::mt19937 rng(5);
    for (auto& b : q) {
      do {
        b = static_cast<uint8_t>(rng());
      } while (!std::isfinite(cpu::Fp8Decode(b, f)));
    }
    DeviceBuffer<uint8_t> dq(n);
    DeviceBuffer<__nv_bfloat16> dy(n);
    DeviceBuffer<float> sinv(1);
    HT_CUDA_ASSERT(dq.Upload(q));
    Upload1(sinv, 0.125f);
    HT_CUDA_ASSERT(Fp8Dequantize(dy.get(), dq.get(), n, sinv.get(), f, nullptr));
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    const auto y = dy.Download();
    std::vector<float> want(n);
    cpu::Fp8Dequantize(want.data(), q.data(), n, 0.125f, f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(HostToF(y[i]), want[i]) << i;
  }
}

TEST(Fp8ScalesFromAmax, MatchesHostRule) {
  HT_SKIP_WITHOUT_GPU();
  const int n = 300, stride = 3;
  std::vector<float> amax(n * stride), scale(n * stride, 4.0f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> mant(0.5f, 1.0f);
  for (int i = 0; i < n; ++i) amax[i * stride] = std::ldexp(mant(rng), static_cast<int>(rng() % 80) - 40);
  amax[0] = 0.0f;
  amax[stride] = INFINITY;
  amax[2 * stride] = std::nanf("");
  DeviceBuffer<float> da(n * stride), ds(n * stride), dsi(n * stride);
  HT_CUDA_ASSERT(da.Upload(amax));
  HT_CUDA_ASSERT(ds.Upload(scale));
  HT_CUDA_ASSERT(Fp8ScalesFromAmax(da.get(), ds.get(), dsi.get(), n, stride, Fp8Format::kE5M2, 1, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const auto got = ds.Download(), got_inv = dsi.Download();
  for (int i = 0; i < n; ++i) {
    const float want = model::Fp8ScaleFromAmax(amax[i * stride], model::kFp8E5M2Max, 1, 4.0f);
    ASSERT_EQ(got[i * stride], want) << i;
    ASSERT_EQ(got_inv[i * stride] * want, 1.0f) << i;
    if (i > 0) {
      ASSERT_EQ(got[i * stride - 1], 4.0f) << "wrote outside its slots";
    }
  }
  EXPECT_EQ(got[0], 4.0f);  // 0, inf and NaN keep the previous scale
  EXPECT_EQ(got[stride], 4.0f);
  EXPECT_EQ(got[2 * stride], 4.0f);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
