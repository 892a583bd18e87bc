// FP8 GEMMs against an fp64 reference over the dequantized operands (random
// data, never zeros), in the three shapes the model runs: forward (e4m3 x
// e4m3, bf16 out, fused residual), dgrad (e5m2 x e4m3, bf16 out) and wgrad
// (e5m2 x e4m3, fp32 out accumulated with beta 1).
#include "runtime/kernels/cuda/fp8_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using model::Fp8Format;
using testing::DeviceBuffer;
using testing::ExpectClose;

#define HT_SKIP_WITHOUT_FP8()                                          \
  do {                                                                 \
    HT_SKIP_WITHOUT_GPU();                                             \
    const std::string why = Fp8UnsupportedReason(0);                   \
    if (!why.empty()) GTEST_SKIP() << why;                             \
  } while (0)

// A [rows, ld] FP8 operand made from random values of magnitude ~`mag`,
// with its dequantized copy for the reference.
struct HostOperand {
  std::vector<uint8_t> q;
  std::vector<double> deq;  // [rows, cols]
  float scale_inv = 1;
};

HostOperand MakeOperand(int rows, int cols, long ld, Fp8Format f, float mag, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, mag);
  std::vector<float> x(size_t(rows) * cols);
  for (float& v : x) v = normal(rng);
  const float scale = model::Fp8ScaleFromAmax(cpu::AbsMax(x.data(), x.size()), model::Fp8MaxOf(f), 0, 1.0f);
  HostOperand o;
  o.scale_inv = 1.0f / scale;
  o.q.assign(size_t(rows) * ld, 0xFF);  // padding columns: NaN bytes, must not be read
  o.deq.resize(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const uint8_t b = cpu::Fp8Encode(x[size_t(r) * cols + c] * scale, f);
      o.q[size_t(r) * ld + c] = b;
      o.deq[size_t(r) * cols + c] = double(cpu::Fp8Decode(b, f)) * o.scale_inv;
    }
  }
  return o;
}

struct Case {
  int m, n, k;
  Fp8Format fa, fb;
  DType c_type;
  float beta;
  bool separate_c_in;
  bool fast_accum;
  long lda_pad = 0;
  double tol;
};

void RunCase(Fp8Gemm& gemm, const Case& t, unsigned seed) {
  std::mt19937 rng(seed);
  const long lda = t.k + t.lda_pad, ldb = t.k;
  const HostOperand a = MakeOperand(t.m, t.k, lda, t.fa, 0.02f, rng);
  const HostOperand b = MakeOperand(t.n, t.k, ldb, t.fb, 3.0f, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<double> c0(size_t(t.m) * t.n);
  for (double& v : c0) v = normal(rng);
  DeviceBuffer<uint8_t> da(a.q.size()), db(b.q.size());
  // Both scales in one buffer, 256 bytes apart (as the backend's slots are).
  DeviceBuffer<float> scales(128);
  HT_CUDA_ASSERT(da.Upload(a.q));
  HT_CUDA_ASSERT(db.Upload(b.q));
  std::vector<float> hs(128, 0.0f);
  hs[0] = a.scale_inv;
  hs[64] = b.scale_inv;
  HT_CUDA_ASSERT(scales.Upload(hs));
  const float* sa_ptr = scales.get();
  const float* sb_ptr = scales.get() + 64;
  const size_t mn = size_t(t.m) * t.n;
  DeviceBuffer<float> c32(t.c_type == DType::kF32 ? mn : 1), cin32(mn);
  DeviceBuffer<__nv_bfloat16> c16(t.c_type == DType::kBF16 ? mn : 1), cin16(mn);
  // The addend in C's type (its rounded values are what the reference adds).
  if (t.c_type == DType::kF32) {
    std::vector<float> h(c0.begin(), c0.end());
    HT_CUDA_ASSERT((t.separate_c_in ? cin32 : c32).Upload(h));
  } else {
    std::vector<__nv_bfloat16> h(mn);
    for (size_t i = 0; i < mn; ++i) {
      h[i] = __float2bfloat16_rn(static_cast<float>(c0[i]));
      c0[i] = __bfloat162float(h[i]);
    }
    HT_CUDA_ASSERT((t.separate_c_in ? cin16 : c16).Upload(h));
  }
  Fp8GemmArgs g;
  g.m = t.m, g.n = t.n, g.k = t.k;
  g.a = {da.get(), t.fa, sa_ptr, lda};
  g.b = {db.get(), t.fb, sb_ptr, ldb};
  g.c_type = t.c_type;
  g.c = t.c_type == DType::kF32 ? static_cast<void*>(c32.get()) : static_cast<void*>(c16.get());
  if (t.separate_c_in) {
    g.c_in = t.c_type == DType::kF32 ? static_cast<const void*>(cin32.get()) : static_cast<const void*>(cin16.get());
  }
  g.beta = t.beta;
  g.fast_accum = t.fast_accum;
  const Status st = gemm.Matmul(g, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> ref(mn), got(mn);
  for (int i = 0; i < t.m; ++i) {
    for (int j = 0; j < t.n; ++j) {
      double s = 0;
      for (int kk = 0; kk < t.k; ++kk) s += a.deq[size_t(i) * t.k + kk] * b.deq[size_t(j) * t.k + kk];
      ref[size_t(i) * t.n + j] = s + t.beta * c0[size_t(i) * t.n + j];
    }
  }
  if (t.c_type == DType::kF32) {
    const auto h = c32.Download();
    for (size_t i = 0; i < mn; ++i) got[i] = h[i];
  } else {
    const auto h = c16.Download();
    for (size_t i = 0; i < mn; ++i) got[i] = __bfloat162float(h[i]);
  }
  ExpectClose(got, ref, t.tol, "fp8 gemm");
}

TEST(Fp8Gemm, ModelShapesMatchReference) {
  HT_SKIP_WITHOUT_FP8();
  auto gemm = Fp8Gemm::Create(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const Fp8Format e4 = Fp8Format::kE4M3, e5 = Fp8Format::kE5M2;
  const std::vector<Case> cases = {
      // forward, residual add from a separate addend, fast accumulation
      {512, 384, 256, e4, e4, DType::kBF16, 1.0f, true, true, 0, 8e-3},
      // forward without residual, the input a strided view
      {256, 192, 128, e4, e4, DType::kBF16, 0.0f, false, true, 64, 8e-3},
      // dgrad: e5m2 output gradient x e4m3 transposed weight
      {512, 256, 384, e5, e4, DType::kBF16, 0.0f, false, false, 0, 8e-3},
      // wgrad: fp32, accumulating onto what C holds (an H100 measured 1.04e-4
      // for the first: the tensor cores' fp32 accumulation, not fp64)
      {192, 256, 512, e5, e4, DType::kF32, 1.0f, false, false, 0, 5e-4},
      {192, 256, 512, e4, e5, DType::kF32, 0.0f, false, false, 0, 5e-4},
  };
  unsigned seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.m << "x" << c.n << "x" << c.k << " c_type "
                                    << DTypeName(c.c_type) << " beta " << c.beta);
    RunCase(**gemm, c, seed++);
  }
  EXPECT_EQ((*gemm)->cached_plans(), cases.size());
}

// Autotuning picks only among algorithms whose bits equal the heuristic's
// first choice and never writes C (which wgrad accumulates into): a tuned and
// an untuned runner give the same bytes, twice in a row.
TEST(Fp8Gemm, AutotuneKeepsTheHeuristicsBits) {
  HT_SKIP_WITHOUT_FP8();
  auto tuned = Fp8Gemm::Create(0);
  auto plain = Fp8Gemm::Create(0);
  ASSERT_TRUE(tuned.ok() && plain.ok());
  (*plain)->set_autotune(false);
  std::mt19937 rng(7);
  const int m = 1024, n = 768, k = 2048;
  const HostOperand a = MakeOperand(m, k, k, Fp8Format::kE5M2, 0.02f, rng);
  const HostOperand b = MakeOperand(n, k, k, Fp8Format::kE4M3, 3.0f, rng);
  DeviceBuffer<uint8_t> da(a.q.size()), db(b.q.size());
  DeviceBuffer<float> scales(128);
  HT_CUDA_ASSERT(da.Upload(a.q));
  HT_CUDA_ASSERT(db.Upload(b.q));
  std::vector<float> hs(128, 0.0f);
  hs[0] = a.scale_inv;
  hs[64] = b.scale_inv;
  HT_CUDA_ASSERT(scales.Upload(hs));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> c0(size_t(m) * n);
  for (float& v : c0) v = normal(rng);
  std::vector<std::vector<float>> out;
  for (Fp8Gemm* gemm : {tuned->get(), plain->get()}) {
    DeviceBuffer<float> c(c0.size());
    HT_CUDA_ASSERT(c.Upload(c0));
    Fp8GemmArgs g;
    g.m = m, g.n = n, g.k = k;
    g.a = {da.get(), Fp8Format::kE5M2, scales.get(), 0};
    g.b = {db.get(), Fp8Format::kE4M3, scales.get() + 64, 0};
    g.c = c.get();
    g.c_type = DType::kF32;
    g.beta = 1.0f;  // wgrad: dW += dYt . Xt^T
    for (int rep = 0; rep < 2; ++rep) ASSERT_TRUE(gemm->Matmul(g, nullptr).ok());
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    out.push_back(c.Download());
  }
  ASSERT_EQ(out[0].size(), out[1].size());
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0);
  EXPECT_NE(out[0][0], c0[0]);  // the product landed
  const GemmTuneStats ts = (*tuned)->tune_stats();
  EXPECT_EQ((*plain)->tune_stats().shapes, 0);
  if (ts.shapes == 0) GTEST_SKIP() << "cuBLASLt offered one candidate: nothing to tune";
  EXPECT_EQ(ts.shapes, 1);
  EXPECT_LE(ts.chosen_us, ts.heuristic_us);
  std::printf("fp8 autotune %dx%dx%d: heuristic %.1f us, chosen %.1f us, %d rejected\n", m, n, k,
              ts.heuristic_us, ts.chosen_us, ts.rejected);
}

TEST(Fp8Gemm, RejectsWhatTheKernelsDoNotTake) {
  HT_SKIP_WITHOUT_FP8();
  auto gemm = Fp8Gemm::Create(0);
  ASSERT_TRUE(gemm.ok());
  DeviceBuffer<uint8_t> a(64 * 64), b(64 * 64);
  DeviceBuffer<float> s(4), c(64 * 64);
  Fp8GemmArgs g;
  g.m = g.n = g.k = 64;
  g.a = {a.get(), Fp8Format::kE5M2, s.get(), 0};
  g.b = {b.get(), Fp8Format::kE5M2, s.get(), 0};
  g.c = c.get();
  g.c_type = DType::kF32;
  EXPECT_NE((*gemm)->Matmul(g, nullptr).message().find("e5m2 x e5m2"), std::string::npos);
  g.b.format = Fp8Format::kE4M3;
  g.k = 24;
  EXPECT_NE((*gemm)->Matmul(g, nullptr).message().find("16-byte aligned"), std::string::npos);
  g.k = 64;
  g.c_type = DType::kF16;
  EXPECT_NE((*gemm)->Matmul(g, nullptr).message().find("bf16 or fp32"), std::string::npos);
  g.c_type = DType::kF32;
  g.a.scale_inv = s.get() + 1;  // 4-byte aligned
  EXPECT_NE((*gemm)->Matmul(g, nullptr).message().find("16-byte aligned"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
