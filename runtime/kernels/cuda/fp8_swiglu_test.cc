// SwiGLU with the FP8 cast fused, against the unfused path bit for bit: the
// SwiGLU kernels (swiglu.h, checked against fp64 in swiglu_test) for the bf16
// values, then the CPU FP8 reference (cpu/fp8.h) for the codes and the amax.
// Random inputs over a wide range with a scale that saturates the tails;
// the vector and element paths, both formats.
#include "runtime/kernels/cuda/fp8_swiglu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/swiglu.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
using model::Fp8Format;
using testing::DeviceBuffer;
using testing::HostFromF;
using testing::HostToF;

std::vector<bf16> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bf16> v(n);
  for (auto& x : v) x = HostFromF<bf16>(normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 8) - 3));
  return v;
}

std::vector<float> ToFloat(const std::vector<bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = HostToF(v[i]);
  return f;
}

float Download1(const float* d) {
  float v = 0;
  cudaMemcpy(&v, d, sizeof(float), cudaMemcpyDeviceToHost);
  return v;
}

// gate|up as one [rows, 2 * cols] projection (the model's layout).
void Check(int rows, int cols, Fp8Format f, unsigned seed) {
  std::mt19937 rng(seed);
  const size_t n = size_t(rows) * cols, n2 = 2 * n;
  const long in_stride = 2L * cols;
  const auto gu = Random(n2, rng), dout = Random(n, rng);
  DeviceBuffer<bf16> dgu(n2), ddout(n), out(n), want_out(n), dgrad(n2);
  DeviceBuffer<uint8_t> q(n), dq(n2);
  DeviceBuffer<float> scale(1), amax(2);
  HT_CUDA_ASSERT(dgu.Upload(gu));
  HT_CUDA_ASSERT(ddout.Upload(dout));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, 2 * sizeof(float)));
  const bf16* gate = dgu.get();
  const bf16* up = dgu.get() + cols;

  // The unfused path: bf16 SwiGLU forward and backward.
  HT_CUDA_ASSERT(SwiGluForward<bf16>(want_out.get(), cols, gate, up, in_stride, rows, cols, nullptr));
  HT_CUDA_ASSERT(SwiGluBackward<bf16>(dgrad.get(), dgrad.get() + cols, in_stride, ddout.get(), cols,
                                      gate, up, in_stride, rows, cols, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const auto act = ToFloat(want_out.Download()), grad = ToFloat(dgrad.Download());
  // Scales that saturate the largest values of each.
  const float fmax = model::Fp8MaxOf(f);
  const float s_fwd = std::exp2(std::ceil(std::log2(2.0f * fmax / cpu::AbsMax(act.data(), n))));
  const float s_bwd = std::exp2(std::ceil(std::log2(2.0f * fmax / cpu::AbsMax(grad.data(), n2))));

  cudaMemcpy(scale.get(), &s_fwd, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(SwiGluForwardFp8(out.get(), cols, q.get(), cols, gate, up, in_stride, rows, cols,
                                  scale.get(), amax.get(), f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  cudaMemcpy(scale.get(), &s_bwd, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(SwiGluBackwardFp8(dq.get(), ddout.get(), cols, gate, up, in_stride, rows, cols,
                                   scale.get(), amax.get() + 1, f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());

  // bf16 activation: the unfused kernel's bytes, and close to fp32 math.
  const auto got_out = ToFloat(out.Download());
  EXPECT_EQ(got_out, act) << rows << "x" << cols;
  const auto guf = ToFloat(gu);
  for (size_t i = 0; i < n; i += 97) {
    const size_t r = i / cols, c = i % cols;
    const double g = guf[r * in_stride + c], u = guf[r * in_stride + cols + c];
    const double ref = g / (1.0 + std::exp(-g)) * u;
    ASSERT_NEAR(got_out[i], ref, 1e-2 * std::fabs(ref) + 1e-6) << i;
  }
  std::vector<uint8_t> want_q(n), want_dq(n2);
  const float want_amax = cpu::CastToFp8(want_q.data(), act.data(), n, s_fwd, f);
  const float want_damax = cpu::CastToFp8(want_dq.data(), grad.data(), n2, s_bwd, f);
  EXPECT_EQ(q.Download(), want_q) << rows << "x" << cols;
  // Codes only (no bf16 output): the same bytes.
  DeviceBuffer<uint8_t> q_only(n);
  cudaMemcpy(scale.get(), &s_fwd, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(SwiGluForwardFp8(nullptr, 0, q_only.get(), cols, gate, up, in_stride, rows, cols,
                                  scale.get(), nullptr, f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(q_only.Download(), want_q) << rows << "x" << cols;
  EXPECT_EQ(dq.Download(), want_dq) << rows << "x" << cols;
  EXPECT_EQ(Download1(amax.get()), want_amax);
  EXPECT_EQ(Download1(amax.get() + 1), want_damax);

  // The transposing variants: the same codes, and their transpose.
  auto transpose = [](const std::vector<uint8_t>& q, int r, int c) {
    std::vector<uint8_t> t(q.size());
    for (int i = 0; i < r; ++i) {
      for (int j = 0; j < c; ++j) t[size_t(j) * r + i] = q[size_t(i) * c + j];
    }
    return t;
  };
  DeviceBuffer<uint8_t> q2(n), qt(n), dq2(n2), dqt(n2);
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, 2 * sizeof(float)));
  cudaMemcpy(scale.get(), &s_fwd, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(SwiGluForwardFp8Transpose(q2.get(), qt.get(), gate, up, in_stride, rows, cols,
                                           scale.get(), amax.get(), f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  cudaMemcpy(scale.get(), &s_bwd, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(SwiGluBackwardFp8Transpose(dq2.get(), dqt.get(), ddout.get(), cols, gate, up,
                                            in_stride, rows, cols, scale.get(), amax.get() + 1, f,
                                            nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(q2.Download(), want_q) << "transposing forward " << rows << "x" << cols;
  EXPECT_EQ(qt.Download(), transpose(want_q, rows, cols)) << rows << "x" << cols;
  EXPECT_EQ(dq2.Download(), want_dq) << "transposing backward " << rows << "x" << cols;
  EXPECT_EQ(dqt.Download(), transpose(want_dq, rows, 2 * cols)) << rows << "x" << cols;
  EXPECT_EQ(Download1(amax.get()), want_amax);
  EXPECT_EQ(Download1(amax.get() + 1), want_damax);
  size_t saturated = 0;
  for (size_t i = 0; i < n; ++i) saturated += std::fabs(act[i] * s_fwd) > fmax;
  EXPECT_GT(saturated, 0u) << "the test must exercise saturation";
}

TEST(Fp8SwiGlu, MatchesSwiGluThenCastBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    Check(512, 2048, f, 1);  // vector path
    Check(528, 200, f, 4);   // vector path, partial tiles
    Check(300, 104, f, 2);   // vector path, a grid-stride tail
    Check(65, 37, f, 3);     // element path
  }
}

TEST(Fp8SwiGlu, AmaxAccumulatesIntoTheSlot) {
  HT_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  const int rows = 64, cols = 256;
  const auto gu = Random(size_t(rows) * cols * 2, rng);
  DeviceBuffer<bf16> dgu(gu.size()), out(size_t(rows) * cols);
  DeviceBuffer<uint8_t> q(size_t(rows) * cols);
  DeviceBuffer<float> scale(1), amax(1);
  HT_CUDA_ASSERT(dgu.Upload(gu));
  const float one = 1.0f, big = 1e30f;
  cudaMemcpy(scale.get(), &one, sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(amax.get(), &big, sizeof(float), cudaMemcpyHostToDevice);
  HT_CUDA_ASSERT(SwiGluForwardFp8(out.get(), cols, q.get(), cols, dgu.get(), dgu.get() + cols,
                                  2 * cols, rows, cols, scale.get(), amax.get(),
                                  Fp8Format::kE4M3, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(Download1(amax.get()), big);  // a running max: the larger value stays
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
