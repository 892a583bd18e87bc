// The RoPE backward with the FP8 cast fused, against the unfused path bit for
// bit: RopeBackward (rope.h, checked against the CPU in rope_test) for the
// bf16 gradient, then the CPU FP8 reference (cpu/fp8.h) for the codes, their
// transpose and the amax; the rotation itself also against fp64. Random
// gradients over a wide range, a scale that saturates the tails, the vector
// and element paths, both formats, positions past seq_len (packed rows).
#include "runtime/kernels/cuda/fp8_rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
using model::Fp8Format;
using testing::DeviceBuffer;
using testing::HostFromF;
using testing::HostToF;

struct Shape {
  int rows, seq_len, heads, kv_heads, head_dim;
  int rope_heads() const { return heads + kv_heads; }
  int cols() const { return (heads + 2 * kv_heads) * head_dim; }
};

void Check(const Shape& sh, Fp8Format f, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int rows = sh.rows, cols = sh.cols(), D = sh.head_dim, half = D / 2;
  const size_t n = size_t(rows) * cols;
  std::vector<bf16> g(n);
  for (auto& x : g) x = HostFromF<bf16>(normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 8) - 3));
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0, -2.0 * i / D);
  const std::vector<float> table = RopeCosSinTable(inv_freq, sh.seq_len);

  DeviceBuffer<bf16> dqkv(n), rotated(n);
  DeviceBuffer<float> dtable(table.size()), scale(1), amax(1);
  DeviceBuffer<uint8_t> q(n), qt(n), qt_only(n);
  HT_CUDA_ASSERT(dqkv.Upload(g));
  HT_CUDA_ASSERT(rotated.Upload(g));
  HT_CUDA_ASSERT(cudaMemcpy(dtable.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  // The unfused path's bf16 gradient: RopeBackward in place over dq|dk.
  HT_CUDA_ASSERT(RopeBackward<bf16>(rotated.get(), cols, rotated.get(), cols, dtable.get(), rows,
                                    sh.seq_len, sh.rope_heads(), D, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<float> want(n);
  {
    const auto r = rotated.Download();
    for (size_t i = 0; i < n; ++i) want[i] = HostToF(r[i]);
  }
  // The rotation against fp64 (sampled), and dv untouched.
  for (size_t i = 0; i < n; i += 89) {
    const int r = static_cast<int>(i / cols), c = static_cast<int>(i % cols);
    double ref = HostToF(g[i]);
    if (c < sh.rope_heads() * D) {
      const int k = c % D, j = k % half, base = c - k;
      const double a = (r % sh.seq_len) * inv_freq[j];
      const double x1 = HostToF(g[size_t(r) * cols + base + j]);
      const double x2 = HostToF(g[size_t(r) * cols + base + j + half]);
      ref = k < half ? x1 * std::cos(a) + x2 * std::sin(a) : x2 * std::cos(a) - x1 * std::sin(a);
    }
    ASSERT_NEAR(want[i], ref, 1e-2 * std::fabs(ref) + 1e-4) << r << "," << c;
  }
  const float fmax = model::Fp8MaxOf(f);
  const float s = std::exp2(std::ceil(std::log2(2.0f * fmax / cpu::AbsMax(want.data(), n))));
  std::vector<uint8_t> want_q(n), want_qt(n);
  const float want_amax = cpu::CastToFp8(want_q.data(), want.data(), n, s, f);
  cpu::CastTransposeToFp8(want_qt.data(), want.data(), rows, cols, s, f);

  HT_CUDA_ASSERT(cudaMemcpy(scale.get(), &s, sizeof(float), cudaMemcpyHostToDevice));
  HT_CUDA_ASSERT(cudaMemset(amax.get(), 0, sizeof(float)));
  HT_CUDA_ASSERT(RopeBackwardFp8Transpose(q.get(), qt.get(), dqkv.get(), rows, cols, dtable.get(),
                                          sh.seq_len, sh.rope_heads(), D, scale.get(), amax.get(),
                                          f, nullptr));
  HT_CUDA_ASSERT(RopeBackwardFp8Transpose(nullptr, qt_only.get(), dqkv.get(), rows, cols,
                                          dtable.get(), sh.seq_len, sh.rope_heads(), D, scale.get(),
                                          nullptr, f, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(q.Download(), want_q) << rows << "x" << cols;
  EXPECT_EQ(qt.Download(), want_qt) << rows << "x" << cols;
  EXPECT_EQ(qt_only.Download(), want_qt) << "without row-major codes";
  float got_amax = 0;
  cudaMemcpy(&got_amax, amax.get(), sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(got_amax, want_amax);
  const auto after = dqkv.Download();
  size_t changed = 0;
  for (size_t i = 0; i < n; ++i) changed += HostToF(after[i]) != HostToF(g[i]);
  EXPECT_EQ(changed, 0u) << "the input is only read";
  size_t saturated = 0;
  for (size_t i = 0; i < n; ++i) saturated += std::fabs(want[i] * s) > fmax;
  EXPECT_GT(saturated, 0u) << "the test must exercise saturation";
}

TEST(Fp8Rope, BackwardMatchesRopeThenCastBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE5M2, Fp8Format::kE4M3}) {
    Check({512, 256, 12, 4, 64}, f, 1);   // 125m's heads, two sequences: vector path
    Check({256, 128, 4, 2, 128}, f, 2);   // head_dim 128: the partner half in the next tile
    Check({200, 64, 3, 1, 64}, f, 3);     // rows % 16 != 0: element path
    Check({96, 96, 2, 1, 12}, f, 4);      // half % 8 != 0: element path
  }
}

TEST(Fp8Rope, RefusesBadShapes) {
  HT_SKIP_WITHOUT_GPU();
  DeviceBuffer<bf16> x(64 * 64);
  DeviceBuffer<uint8_t> qt(64 * 64);
  DeviceBuffer<float> table(64), scale(1);
  // Rotated columns past the row, an odd head_dim, no transposed output.
  EXPECT_EQ(RopeBackwardFp8Transpose(nullptr, qt.get(), x.get(), 64, 64, table.get(), 64, 2, 64,
                                     scale.get(), nullptr, Fp8Format::kE5M2, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(RopeBackwardFp8Transpose(nullptr, qt.get(), x.get(), 64, 63, table.get(), 64, 1, 63,
                                     scale.get(), nullptr, Fp8Format::kE5M2, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(RopeBackwardFp8Transpose(nullptr, nullptr, x.get(), 64, 64, table.get(), 64, 1, 64,
                                     scale.get(), nullptr, Fp8Format::kE5M2, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
