// Chunked LM head + cross-entropy (and the row softmax kernel inside it) vs
// the CPU reference's fused classifier, with ignored targets.
#include "runtime/kernels/cuda/lm_head_loss.h"

#include <gtest/gtest.h>

#include "runtime/backends/cpu/ops.h"
#include "runtime/model/math.h"
#include "runtime/kernels/cuda/reduce.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomVector;
using testing::ToDouble;

template <typename T>
class LmHeadLossTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(LmHeadLossTest, Types);

TYPED_TEST(LmHeadLossTest, LossAndGradientsMatchReference) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr DType kT = DTypeOf<T>::value;
  for (const int V : {5003, 5000}) {  // scalar and 16-byte softmax paths
  SCOPED_TRACE("V=" + std::to_string(V));
  const int N = 300, C = 64, chunk = 128;  // last chunk partial
  const int32_t ignore = -100;
  std::mt19937 rng(21);
  std::vector<double> h, w, dw0;
  auto hh = RandomVector<T>(size_t(N) * C, rng, 1.0f, &h);
  auto hw = RandomVector<T>(size_t(V) * C, rng, 0.3f, &w);
  auto hdw0 = RandomVector<float>(size_t(V) * C, rng, 0.01f, &dw0);
  std::vector<int32_t> targets(N);
  std::uniform_int_distribution<int> tok(0, V - 1);
  for (int i = 0; i < N; ++i) targets[i] = (i % 17 == 5) ? ignore : tok(rng);
  const int64_t count = model::CountTargets(targets.data(), N, ignore);
  const float dscale = 3.0f / count;  // grad multiplier 3, mean loss

  auto gemm_or = Gemm::Create(false);
  ASSERT_TRUE(gemm_or.ok()) << gemm_or.status().ToString();
  DeviceBuffer<T> dh_in(h.size()), dwt(w.size()), logits(size_t(chunk) * V), dh(h.size());
  DeviceBuffer<float> dw(dw0.size()), losses(N), dscale_d(1);
  DeviceBuffer<int32_t> dtargets(N);
  DeviceBuffer<double> total(1);
  HT_CUDA_ASSERT(dh_in.Upload(hh));
  HT_CUDA_ASSERT(dwt.Upload(hw));
  HT_CUDA_ASSERT(dw.Upload(hdw0));
  HT_CUDA_ASSERT(dtargets.Upload(targets));
  HT_CUDA_ASSERT(dscale_d.Upload({dscale}));
  LmHeadLossArgs a;
  a.dtype = kT;
  a.h = dh_in.get();
  a.w = dwt.get();
  a.targets = dtargets.get();
  a.n = N;
  a.cols = C;
  a.vocab = V;
  a.chunk_rows = chunk;
  a.ignore_index = ignore;
  a.logits = logits.get();
  a.losses = losses.get();
  a.dh = dh.get();
  a.dw = dw.get();
  a.dscale = dscale_d.get();
  auto st = LmHeadLoss(**gemm_or, a, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_ASSERT(SumFloats(losses.get(), N, total.get(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());

  std::vector<double> rdh(h.size(), 0.0), rdw = dw0;
  const cpu::LossSum ref = cpu::FusedClassifier<double>(
      rdh.data(), rdw.data(), h.data(), w.data(), targets.data(), N, C, V, ignore, dscale);
  ASSERT_EQ(ref.count, count);
  const double got = total.Download()[0];
  // bf16/fp16 logits carry ~3 significant digits; the loss is a mean of
  // log-sum-exps of them.
  const double loss_tol = std::is_same_v<T, float> ? 1e-5 : 5e-3;
  EXPECT_NEAR(got / count, ref.loss_sum / count, loss_tol * std::abs(ref.loss_sum / count))
      << DTypeName(kT);
  const double grad_tol = std::is_same_v<T, float> ? 1e-4 : 3e-2;
  ExpectClose(ToDouble(dh.Download()), rdh, grad_tol, std::string(DTypeName(kT)) + " dh");
  ExpectClose(ToDouble(dw.Download()), rdw, grad_tol, std::string(DTypeName(kT)) + " dw");
  // Ignored rows have zero loss.
  const auto l = losses.Download();
  for (int i = 0; i < N; ++i) {
    if (targets[i] == ignore) {
      ASSERT_EQ(l[i], 0.0f) << i;
    }
  }

  // Forward only gives the same losses.
  LmHeadLossArgs f = a;
  f.dh = nullptr;
  f.dw = nullptr;
  f.dscale = nullptr;
  st = LmHeadLoss(**gemm_or, f, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(l, losses.Download());
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
