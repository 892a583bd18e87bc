// RMSNorm with the FP8 cast fused, against the unfused path bit for bit: the
// RMSNorm kernel (rmsnorm.h, checked against the CPU reference in
// rmsnorm_test) for rstd and the bf16 values, then the CPU FP8 reference
// (cpu/fp8.h) for the codes and the amax. Random inputs and weights over a
// wide range, a scale that saturates the largest values; the register,
// loop and element paths, both formats.
#include "runtime/kernels/cuda/fp8_rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
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

}  // namespace
}  // namespace hypertrain::kernels::cuda
