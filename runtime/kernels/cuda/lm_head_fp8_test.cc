// The LM head's FP8 backward (model.fp8_lm_head):
//  - SoftmaxCrossEntropyFp8Grad against SoftmaxCrossEntropy (the bf16
//    gradient) then the CPU cast (cpu/fp8.h): losses, codes and amax bit for
//    bit, both formats, vector / scalar / large-vocab (opt-in shared memory)
//    paths, ignored rows, saturation;
//  - LmHeadLoss with Fp8Grads against the same call with bf16 backward GEMMs
//    (same FP8 logits): losses bit for bit, the dlogits amax equal, dh and dW
//    within FP8's rounding, and both against the CPU classifier.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/lm_head_loss.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/model/math.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

#define HT_SKIP_WITHOUT_FP8()                             \
  do {                                                    \
    HT_SKIP_WITHOUT_GPU();                                \
    const std::string why = Fp8UnsupportedReason(0);      \
    if (!why.empty()) GTEST_SKIP() << why;                \
  } while (0)

using bf16 = __nv_bfloat16;
using testing::DeviceBuffer;
using testing::HostFromF;
using testing::HostToF;

float Download1(const float* d) {
  float v = 0;
  cudaMemcpy(&v, d, sizeof(float), cudaMemcpyDeviceToHost);
  return v;
}

std::vector<int32_t> Targets(int rows, int vocab, int32_t ignore, std::mt19937& rng) {
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  std::vector<int32_t> t(rows);
  for (int i = 0; i < rows; ++i) t[i] = (i % 7 == 3) ? ignore : tok(rng);
  return t;
}

void CheckFp8Grad(int rows, int vocab, Fp8Format f, unsigned seed) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " vocab " + std::to_string(vocab) +
               (f == Fp8Format::kE5M2 ? " e5m2" : " e4m3"));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int32_t ignore = -100;
  std::vector<bf16> logits(size_t(rows) * vocab);
  for (auto& x : logits) x = HostFromF<bf16>(normal(rng));
  const std::vector<int32_t> targets = Targets(rows, vocab, ignore, rng);
  DeviceBuffer<bf16> ref(logits.size()), got(logits.size());
  DeviceBuffer<float> ref_loss(rows), got_loss(rows), dscale(1), scale(1), amax(1);
  DeviceBuffer<int32_t> dt(rows);
  HT_CUDA_ASSERT(ref.Upload(logits));
  HT_CUDA_ASSERT(got.Upload(logits));
  HT_CUDA_ASSERT(dt.Upload(targets));
  HT_CUDA_ASSERT(dscale.Upload({1.0f / 1000}));
  // The bf16 gradient, then a scale that saturates its largest values.
  HT_CUDA_ASSERT(SoftmaxCrossEntropy<bf16>(ref.get(), vocab, ref_loss.get(), dt.get(), rows, vocab,
                                           ignore, dscale.get(), nullptr));
  const std::vector<bf16> g = ref.Download();
  std::vector<float> gf(g.size());
  for (size_t i = 0; i < g.size(); ++i) gf[i] = HostToF(g[i]);
  const float want_amax = cpu::AbsMax(gf.data(), gf.size());
  ASSERT_GT(want_amax, 0.0f);
  const float s = std::ldexp(1.0f, int(std::floor(std::log2(2 * model::Fp8MaxOf(f) / want_amax))));
  HT_CUDA_ASSERT(scale.Upload({s}));
  HT_CUDA_ASSERT(amax.Upload({0.0f}));
  HT_CUDA_ASSERT(SoftmaxCrossEntropyFp8Grad(got.get(), vocab, got_loss.get(), dt.get(), rows, vocab,
                                            ignore, dscale.get(), scale.get(), amax.get(), f,
                                            nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(got_loss.Download(), ref_loss.Download());
  EXPECT_EQ(Download1(amax.get()), want_amax);
  std::vector<uint8_t> bytes(logits.size() * sizeof(bf16));
  HT_CUDA_ASSERT(cudaMemcpy(bytes.data(), got.get(), bytes.size(), cudaMemcpyDeviceToHost));
  std::vector<uint8_t> want(vocab);
  int saturated = 0, mismatches = 0;
  for (int r = 0; r < rows; ++r) {
    cpu::CastToFp8(want.data(), gf.data() + size_t(r) * vocab, vocab, s, f);
    const uint8_t* row = bytes.data() + size_t(r) * vocab * sizeof(bf16);
    for (int v = 0; v < vocab; ++v) {
      if (row[v] != want[v] && mismatches++ < 5) {
        ADD_FAILURE() << "row " << r << " col " << v << ": " << int(row[v]) << " vs " << int(want[v]);
      }
      saturated += std::abs(cpu::Fp8Decode(want[v], f)) == model::Fp8MaxOf(f);
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(saturated, 0) << "the scale was meant to saturate the largest gradients";
}

TEST(SoftmaxCrossEntropyFp8Grad, MatchesBf16GradientThenCastBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  for (Fp8Format f : {Fp8Format::kE5M2, Fp8Format::kE4M3}) {
    CheckFp8Grad(40, 5008, f, 1);    // vector path, 16-byte code stores
    CheckFp8Grad(24, 5000, f, 2);    // vector loads, byte stores
    CheckFp8Grad(17, 5003, f, 3);    // scalar path
    CheckFp8Grad(6, 65536, f, 4);    // > 48 KiB of shared memory
  }
}

// FP8 codes of x with a scale from its amax (as Fp8Projections does).
struct Codes {
  DeviceBuffer<uint8_t> q, qt;
  DeviceBuffer<float> amax{1}, scale{1}, scale_inv{1};
  Codes(const DeviceBuffer<bf16>& x, int rows, int cols) : q(size_t(rows) * cols), qt(q.size()) {
    EXPECT_EQ(cudaMemset(amax.get(), 0, sizeof(float)), cudaSuccess);
    EXPECT_EQ(Fp8Amax(x.get(), q.size(), amax.get(), nullptr), cudaSuccess);
    EXPECT_EQ(Fp8ScalesFromAmax(amax.get(), scale.get(), scale_inv.get(), 1, 1, Fp8Format::kE4M3,
                                0, nullptr),
              cudaSuccess);
    EXPECT_EQ(Fp8Cast(q.get(), x.get(), q.size(), scale.get(), nullptr, Fp8Format::kE4M3, nullptr),
              cudaSuccess);
    EXPECT_EQ(Fp8Transpose(qt.get(), q.get(), rows, cols, nullptr), cudaSuccess);
  }
};

void RelCos(const std::vector<double>& got, const std::vector<double>& ref, double* rel,
            double* cos) {
  double num = 0, den = 0, dot = 0, gg = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
    dot += got[i] * ref[i];
    gg += got[i] * got[i];
  }
  *rel = std::sqrt(num / den);
  *cos = dot / std::sqrt(gg * den);
}

TEST(LmHeadLossFp8, BackwardGemmsInFp8MatchBf16Backward) {
  HT_SKIP_WITHOUT_FP8();
  const int N = 256, C = 64, V = 5008, chunk = 96;  // last chunk partial (64 rows)
  const int32_t ignore = -100;
  std::mt19937 rng(7);
  std::vector<double> h, w, dw0;
  auto hh = testing::RandomVector<bf16>(size_t(N) * C, rng, 1.0f, &h);
  auto hw = testing::RandomVector<bf16>(size_t(V) * C, rng, 0.3f, &w);
  auto hdw0 = testing::RandomVector<float>(size_t(V) * C, rng, 0.01f, &dw0);
  const std::vector<int32_t> targets = Targets(N, V, ignore, rng);
  const int64_t count = model::CountTargets(targets.data(), N, ignore);
  const float dscale = 1.0f / count;

  auto gemm = Gemm::Create(false);
  auto fp8 = Fp8Gemm::Create(0);
  ASSERT_TRUE(gemm.ok() && fp8.ok());
  DeviceBuffer<bf16> dh_in(h.size()), dwt(w.size()), logits(size_t(chunk) * V), dh(h.size());
  DeviceBuffer<float> dw(dw0.size()), losses(N), dscale_d(1), g_amax(1), g_scale(1), g_scale_inv(1);
  DeviceBuffer<int32_t> dtargets(N);
  DeviceBuffer<uint8_t> dlogits_t(size_t(chunk) * V);
  HT_CUDA_ASSERT(dh_in.Upload(hh));
  HT_CUDA_ASSERT(dwt.Upload(hw));
  HT_CUDA_ASSERT(dtargets.Upload(targets));
  HT_CUDA_ASSERT(dscale_d.Upload({dscale}));
  Codes hq(dh_in, N, C), wq(dwt, V, C);
  LmHeadLossArgs::Fp8Logits f8{fp8->get(), hq.q.get(), wq.q.get(), hq.scale_inv.get(),
                               wq.scale_inv.get()};
  LmHeadLossArgs a;
  a.h = dh_in.get();
  a.w = dwt.get();
  a.targets = dtargets.get();
  a.n = N, a.cols = C, a.vocab = V, a.chunk_rows = chunk, a.ignore_index = ignore;
  a.logits = logits.get();
  a.losses = losses.get();
  a.dh = dh.get();
  a.dw = dw.get();
  a.dscale = dscale_d.get();
  a.fp8 = &f8;
  a.dlogits_amax = g_amax.get();
  // bf16 backward GEMMs (the first pass of a run): records dlogits' amax.
  auto run = [&](const LmHeadLossArgs& args) {
    HT_CUDA_ASSERT(dw.Upload(hdw0));
    HT_CUDA_ASSERT(cudaMemset(g_amax.get(), 0, sizeof(float)));
    const Status st = LmHeadLoss(**gemm, args, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
  };
  run(a);
  const std::vector<float> ref_losses = losses.Download();
  const float ref_amax = Download1(g_amax.get());
  const std::vector<double> ref_dh = testing::ToDouble(dh.Download());
  const std::vector<double> ref_dw = testing::ToDouble(dw.Download());
  ASSERT_GT(ref_amax, 0.0f);
  // Its delayed scale for the FP8 backward.
  HT_CUDA_ASSERT(Fp8ScalesFromAmax(g_amax.get(), g_scale.get(), g_scale_inv.get(), 1, 1,
                                   Fp8Format::kE5M2, 0, nullptr));
  LmHeadLossArgs::Fp8Grads g8{wq.qt.get(), hq.qt.get(), wq.scale_inv.get(), hq.scale_inv.get(),
                              g_scale.get(), g_scale_inv.get(), Fp8Format::kE5M2,
                              dlogits_t.get()};
  LmHeadLossArgs b = a;
  b.fp8_grad = &g8;
  run(b);
  EXPECT_EQ(losses.Download(), ref_losses);
  EXPECT_EQ(Download1(g_amax.get()), ref_amax);
  double rel = 0, cos = 0;
  RelCos(testing::ToDouble(dh.Download()), ref_dh, &rel, &cos);
  EXPECT_GT(cos, 0.995) << "dh";
  EXPECT_LT(rel, 0.1) << "dh";
  const std::vector<double> got_dw = testing::ToDouble(dw.Download());
  std::vector<double> step(dw0.size()), ref_step(dw0.size());
  for (size_t i = 0; i < dw0.size(); ++i) step[i] = got_dw[i] - dw0[i], ref_step[i] = ref_dw[i] - dw0[i];
  RelCos(step, ref_step, &rel, &cos);
  EXPECT_GT(cos, 0.995) << "dW";
  EXPECT_LT(rel, 0.1) << "dW";
  // And against the CPU classifier (exact h, W).
  std::vector<double> rdh(h.size(), 0.0), rdw(w.size(), 0.0);
  cpu::FusedClassifier<double>(rdh.data(), rdw.data(), h.data(), w.data(), targets.data(), N, C, V,
                               ignore, dscale);
  RelCos(testing::ToDouble(dh.Download()), rdh, &rel, &cos);
  EXPECT_GT(cos, 0.99) << "dh vs CPU";
  RelCos(step, rdw, &rel, &cos);
  EXPECT_GT(cos, 0.99) << "dW vs CPU";
  // dw_overwrite: the first chunk writes dW.
  b.dw_overwrite = true;
  run(b);
  const std::vector<double> over = testing::ToDouble(dw.Download());
  for (size_t i = 0; i < over.size(); i += 997) EXPECT_NEAR(over[i], step[i], 1e-6) << i;
  // Frozen head: dh only.
  b.dw = nullptr;
  b.dw_overwrite = false;
  run(b);
  RelCos(testing::ToDouble(dh.Download()), ref_dh, &rel, &cos);
  EXPECT_GT(cos, 0.995) << "frozen-head dh";
  // Bad shapes are refused before anything runs.
  b.dw = dw.get();
  b.chunk_rows = 90;
  EXPECT_FALSE(LmHeadLoss(**gemm, b, nullptr).ok());
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
