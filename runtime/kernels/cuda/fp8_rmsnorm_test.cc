// RMSNorm with the FP8 cast fused, against the unfused path bit for bit: the
// RMSNorm kernel (rmsnorm.h, checked against the CPU reference in
// rmsnorm_test) for rstd and the bf16 values, then the CPU FP8 reference
// (cpu/fp8.h) for the codes and the amax. Random inputs and weights over a
// wide range, a scale that saturates the largest values; the register,
// loop and element paths, both formats.
//
// The transposing forward (RmsNormForwardFp8Transpose) against
// RmsNormForwardFp8 + Fp8Transpose, and the backward with the FP8 gradient
// (RmsNormBackwardFp8) against RmsNormBackward + Fp8CastTranspose, byte for
// byte: their one-pass kernels (the 125m shape among others) and the shapes
// that fall back to the two kernels.
#include "runtime/kernels/cuda/fp8_rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
using model::Fp8Format;
using testing::DeviceBuffer;
using testing::HostFromF;
using testing::HostToF;

std::vector<bf16> Random(size_t n, float spread, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bf16> v(n);
  for (auto& x : v) {
    x = HostFromF<bf16>(normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 8) - 3) * spread);
  }
  return v;
}

float Download1(const float* d) {
  float v = 0;
  cudaMemcpy(&v, d, sizeof(float), cudaMemcpyDeviceToHost);
  return v;
}

void Check(int rows, int cols, Fp8Format f, unsigned seed, int q_offset = 0) {
  SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " format " << int(f) << " q+" << q_offset);
  std::mt19937 rng(seed);
  const size_t n = size_t(rows) * cols;
  const auto x = Random(n, 1.0f, rng), w = Random(cols, 0.5f, rng);
  const float eps = 1e-5f;
  DeviceBuffer<bf16> dx(n), dw(cols), y(n);
  DeviceBuffer<float> rstd(rows), want_rstd(rows), scale(1), amax(1);
  DeviceBuffer<uint8_t> q(n + 8);
  HT_CUDA_ASSERT(dx.Upload(x));
  HT_CUDA_ASSERT(dw.Upload(w));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(RmsNormForward<bf16>(y.get(), want_rstd.get(), nullptr, dx.get(), nullptr,
                                      dw.get(), rows, cols, eps, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<float> yf(n);
  const auto yh = y.Download();
  for (size_t i = 0; i < n; ++i) yf[i] = HostToF(yh[i]);
  const float fmax = model::Fp8MaxOf(f);
  const float s = std::exp2(std::ceil(std::log2(2.0f * fmax / cpu::AbsMax(yf.data(), n))));
  cudaMemcpy(scale.get(), &s, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(RmsNormForwardFp8(q.get() + q_offset, rstd.get(), dx.get(), dw.get(), rows, cols,
                                   eps, scale.get(), amax.get(), f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<uint8_t> want_q(n);
  const float want_amax = cpu::CastToFp8(want_q.data(), yf.data(), n, s, f);
  const auto got = q.Download();
  EXPECT_EQ(std::vector<uint8_t>(got.begin() + q_offset, got.begin() + q_offset + n), want_q);
  EXPECT_EQ(rstd.Download(), want_rstd.Download());
  EXPECT_EQ(Download1(amax.get()), want_amax);
  size_t saturated = 0;
  for (float v : yf) saturated += std::fabs(v * s) > fmax;
  EXPECT_GT(saturated, 0u) << "the test must exercise saturation";
  // And the normalisation itself (fp64, one row in 7).
  for (int r = 0; r < rows; r += 7) {
    double ss = 0;
    for (int c = 0; c < cols; ++c) ss += double(HostToF(x[size_t(r) * cols + c])) * HostToF(x[size_t(r) * cols + c]);
    const double rs = 1.0 / std::sqrt(ss / cols + eps);
    ASSERT_NEAR(Download1(rstd.get() + r), rs, 1e-4 * rs) << r;
  }
}

TEST(Fp8RmsNorm, MatchesRmsNormThenCastBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    Check(333, 2048, f, 1);     // registers, 8 packs per lane (1b), a partial block
    Check(256, 768, f, 2);      // registers, 3 packs (125m)
    Check(100, 1280, f, 3);     // loop path (5 packs)
    Check(64, 2048, f, 4, 3);   // misaligned codes: byte stores
    Check(37, 100, f, 5);       // element path
  }
}

TEST(Fp8RmsNorm, AmaxIsARunningMax) {
  HT_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  const int rows = 16, cols = 256;
  const auto x = Random(size_t(rows) * cols, 1.0f, rng), w = Random(cols, 1.0f, rng);
  DeviceBuffer<bf16> dx(x.size()), dw(cols);
  DeviceBuffer<float> rstd(rows), scale(1), amax(1);
  DeviceBuffer<uint8_t> q(x.size());
  HT_CUDA_ASSERT(dx.Upload(x));
  HT_CUDA_ASSERT(dw.Upload(w));
  const float one = 1.0f, big = 1e30f;
  cudaMemcpy(scale.get(), &one, sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(amax.get(), &big, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(RmsNormForwardFp8(q.get(), rstd.get(), dx.get(), dw.get(), rows, cols, 1e-5f,
                                   scale.get(), amax.get(), Fp8Format::kE4M3, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(Download1(amax.get()), big);
  EXPECT_EQ(RmsNormForwardFp8(q.get(), rstd.get(), dx.get(), dw.get(), 0, cols, 1e-5f, scale.get(),
                              amax.get(), Fp8Format::kE4M3, nullptr),
            cudaErrorInvalidValue);
}

// Raw bytes of a downloaded buffer (bf16 and float compared bit for bit).
template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A power-of-two scale that pushes the largest values past the format's max.
float SaturatingScale(const std::vector<float>& v, Fp8Format f) {
  const float amax = cpu::AbsMax(v.data(), v.size());
  return std::exp2(std::ceil(std::log2(2.0f * model::Fp8MaxOf(f) / amax)));
}

size_t Saturated(const std::vector<float>& v, float s, Fp8Format f) {
  size_t n = 0;
  for (float x : v) n += std::fabs(x * s) > model::Fp8MaxOf(f);
  return n;
}

void ExpectTransposed(const std::vector<uint8_t>& q, const std::vector<uint8_t>& qt, int rows,
                      int cols) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      ASSERT_EQ(qt[size_t(c) * rows + r], q[size_t(r) * cols + c]) << r << "," << c;
    }
  }
}

// RmsNormForwardFp8Transpose vs RmsNormForwardFp8 then Fp8Transpose.
void CheckTranspose(int rows, int cols, Fp8Format f, unsigned seed, int q_offset = 0) {
  SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " format " << int(f) << " q+"
                                    << q_offset);
  std::mt19937 rng(seed);
  const size_t n = size_t(rows) * cols;
  const auto x = Random(n, 1.0f, rng), w = Random(cols, 0.5f, rng);
  const float eps = 1e-5f;
  DeviceBuffer<bf16> dx(n), dw(cols), y(n);
  DeviceBuffer<float> rstd(rows), want_rstd(rows), scale(1), amax(1), want_amax(1);
  DeviceBuffer<uint8_t> q(n + 8), qt(n), want_q(n), want_qt(n);
  HT_CUDA_ASSERT(dx.Upload(x));
  HT_CUDA_ASSERT(dw.Upload(w));
  HT_CUDA_ASSERT(RmsNormForward<bf16>(y.get(), want_rstd.get(), nullptr, dx.get(), nullptr,
                                      dw.get(), rows, cols, eps, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<float> yf(n);
  const auto yh = y.Download();
  for (size_t i = 0; i < n; ++i) yf[i] = HostToF(yh[i]);
  const float s = SaturatingScale(yf, f);
  EXPECT_GT(Saturated(yf, s, f), 0u) << "the test must exercise saturation";
  HT_CUDA_ASSERT(cudaMemcpy(scale.get(), &s, sizeof(float), cudaMemcpyHostToDevice));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(cudaMemset(want_amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(RmsNormForwardFp8(want_q.get(), want_rstd.get(), dx.get(), dw.get(), rows, cols,
                                   eps, scale.get(), want_amax.get(), f, nullptr));
  HT_CUDA_ASSERT(Fp8Transpose(want_qt.get(), want_q.get(), rows, cols, nullptr));
  HT_CUDA_ASSERT(RmsNormForwardFp8Transpose(q.get() + q_offset, qt.get(), rstd.get(), dx.get(),
                                            dw.get(), rows, cols, eps, scale.get(), amax.get(), f,
                                            nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const auto got = q.Download();
  const std::vector<uint8_t> got_q(got.begin() + q_offset, got.begin() + q_offset + n);
  const auto got_qt = qt.Download();
  EXPECT_TRUE(got_q == want_q.Download()) << "codes differ";
  EXPECT_TRUE(got_qt == want_qt.Download()) << "transposed codes differ";
  EXPECT_EQ(Bytes(rstd.Download()), Bytes(want_rstd.Download()));
  EXPECT_EQ(Download1(amax.get()), Download1(want_amax.get()));
  EXPECT_GT(Download1(amax.get()), 0.0f);
  ExpectTransposed(got_q, got_qt, rows, cols);
}

TEST(Fp8RmsNormTranspose, MatchesForwardThenTransposeBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    CheckTranspose(4096, 768, f, 11);    // 125m's hidden size: one pass, 64 blocks
    CheckTranspose(336, 2048, f, 12);    // 1b's; a partial row tile (336 = 5 * 64 + 16)
    CheckTranspose(112, 1280, f, 13);    // the loop path's order (5 packs per lane)
    CheckTranspose(80, 200, f, 14);      // a partial column tile, packs past the lanes
    CheckTranspose(100, 768, f, 15);     // rows % 16 != 0: the two-kernel fallback
    CheckTranspose(64, 768, f, 16, 3);   // misaligned codes: the fallback
    CheckTranspose(37, 100, f, 17);      // element path (cols % 8 != 0): the fallback
  }
}

// RmsNormBackwardFp8 vs RmsNormBackward then Fp8CastTranspose. dx aliases
// dres as in the block backward (dres += norm backward), or dres is null.
void CheckBackward(int rows, int cols, Fp8Format f, unsigned seed, bool with_dres = true,
                   int q_offset = 0) {
  SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " format " << int(f)
                                    << (with_dres ? " dres" : " no dres") << " q+" << q_offset);
  std::mt19937 rng(seed);
  const size_t n = size_t(rows) * cols;
  const auto r = Random(n, 1.0f, rng), dy = Random(n, 0.01f, rng), dres = Random(n, 0.01f, rng);
  const auto w = Random(cols, 0.5f, rng);
  std::vector<float> dw0(cols);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : dw0) v = normal(rng);
  DeviceBuffer<bf16> dr(n), ddy(n), dw(cols), y(n), dx(n), want_dx(n);
  DeviceBuffer<float> rstd(rows), wgrad(cols), want_wgrad(cols), scale(1), amax(1), want_amax(1);
  DeviceBuffer<float> scratch(RmsNormBackwardScratchFloats(cols));
  DeviceBuffer<uint8_t> q(n + 8), qt(n), want_q(n), want_qt(n);
  HT_CUDA_ASSERT(dr.Upload(r));
  HT_CUDA_ASSERT(ddy.Upload(dy));
  HT_CUDA_ASSERT(dw.Upload(w));
  HT_CUDA_ASSERT(RmsNormForward<bf16>(y.get(), rstd.get(), nullptr, dr.get(), nullptr, dw.get(),
                                      rows, cols, 1e-5f, nullptr));
  auto run_reference = [&] {
    HT_CUDA_ASSERT(want_dx.Upload(dres));
    HT_CUDA_ASSERT(want_wgrad.Upload(dw0));
    HT_CUDA_ASSERT(RmsNormBackward<bf16>(want_dx.get(), with_dres ? want_dx.get() : nullptr,
                                         want_wgrad.get(), scratch.get(), ddy.get(), dr.get(),
                                         dw.get(), rstd.get(), rows, cols, nullptr));
  };
  run_reference();  // for the scale
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<float> dxf(n);
  const auto dxh = want_dx.Download();
  for (size_t i = 0; i < n; ++i) dxf[i] = HostToF(dxh[i]);
  const float s = SaturatingScale(dxf, f);
  EXPECT_GT(Saturated(dxf, s, f), 0u) << "the test must exercise saturation";
  HT_CUDA_ASSERT(cudaMemcpy(scale.get(), &s, sizeof(float), cudaMemcpyHostToDevice));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(cudaMemset(want_amax.get(), 0, sizeof(float)));
  run_reference();
  HT_CUDA_ASSERT(Fp8CastTranspose<bf16>(want_q.get(), want_qt.get(), want_dx.get(), rows, cols,
                                        scale.get(), want_amax.get(), f, nullptr));
  HT_CUDA_ASSERT(dx.Upload(dres));
  HT_CUDA_ASSERT(wgrad.Upload(dw0));
  const RmsNormFp8Grad out{q.get() + q_offset, qt.get(), scale.get(), amax.get(), f};
  HT_CUDA_ASSERT(RmsNormBackwardFp8(dx.get(), with_dres ? dx.get() : nullptr, wgrad.get(),
                                    scratch.get(), ddy.get(), dr.get(), dw.get(), rstd.get(), rows,
                                    cols, out, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const auto got = q.Download();
  const std::vector<uint8_t> got_q(got.begin() + q_offset, got.begin() + q_offset + n);
  const auto got_qt = qt.Download();
  EXPECT_EQ(Bytes(dx.Download()), Bytes(want_dx.Download())) << "dx differs";
  EXPECT_EQ(Bytes(wgrad.Download()), Bytes(want_wgrad.Download())) << "dw differs";
  EXPECT_TRUE(got_q == want_q.Download()) << "codes differ";
  EXPECT_TRUE(got_qt == want_qt.Download()) << "transposed codes differ";
  EXPECT_EQ(Download1(amax.get()), Download1(want_amax.get()));
  EXPECT_EQ(Download1(amax.get()), cpu::AbsMax(dxf.data(), n));
  ExpectTransposed(got_q, got_qt, rows, cols);
}

TEST(Fp8RmsNormBackward, MatchesBackwardThenCastTransposeBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE5M2, Fp8Format::kE4M3}) {
    CheckBackward(4096, 768, f, 21);          // 125m: one pass (3 packs), two row iterations
    CheckBackward(6144, 256, f, 22, false);   // 1 pack, three iterations (buffer reuse), no dres
    CheckBackward(264, 1024, f, 23);          // 4 packs (48 KiB shared), blocks without rows
    CheckBackward(512, 1536, f, 24);          // 6 packs: over 48 KiB of shared memory
    CheckBackward(1024, 2048, f, 25);         // 8 packs (1b)
    CheckBackward(100, 768, f, 26);           // rows % 8 != 0: RmsNormBackward + Fp8CastTranspose
    CheckBackward(520, 1280, f, 27);          // 5 packs: RmsNormBackward's two-kernel path
    CheckBackward(64, 768, f, 28, true, 3);   // misaligned codes: the fallback
    CheckBackward(37, 100, f, 29);            // element path: the fallback
  }
}

TEST(Fp8RmsNormBackward, RejectsMissingOutputs) {
  HT_SKIP_WITHOUT_GPU();
  DeviceBuffer<bf16> b(256);
  DeviceBuffer<float> f(256);
  DeviceBuffer<uint8_t> q(256);
  RmsNormFp8Grad out{q.get(), nullptr, f.get(), nullptr, Fp8Format::kE5M2};
  EXPECT_EQ(RmsNormBackwardFp8(b.get(), b.get(), f.get(), f.get(), b.get(), b.get(), b.get(),
                               f.get(), 1, 256, out, nullptr),
            cudaErrorInvalidValue);
  out.qt = q.get();
  EXPECT_EQ(RmsNormBackwardFp8(b.get(), b.get(), f.get(), f.get(), b.get(), b.get(), b.get(),
                               f.get(), 0, 256, out, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
