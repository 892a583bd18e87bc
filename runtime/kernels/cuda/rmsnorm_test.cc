// Fused residual + RMSNorm forward/backward vs the CPU reference (fp64).
#include "runtime/kernels/cuda/rmsnorm.h"

#include <gtest/gtest.h>

#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomVector;
using testing::ToDouble;

template <typename T>
class RmsNormTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(RmsNormTest, Types);

TYPED_TEST(RmsNormTest, ForwardWithAndWithoutResidual) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  // Scalar path (202 % 4 != 0), vector path (264), row-in-registers kernels
  // (768 and 2048: a multiple of 32 lanes x 16 bytes in every type).
  for (const int C : {202, 264, 768, 2048}) {
  SCOPED_TRACE("C=" + std::to_string(C));
  const int N = 77;
  const double eps = 1e-5;
  std::mt19937 rng(3);
  std::vector<double> a, b, w;
  auto ha = RandomVector<T>(size_t(N) * C, rng, 1.0f, &a);
  auto hb = RandomVector<T>(size_t(N) * C, rng, 0.5f, &b);
  auto hw = RandomVector<T>(C, rng, 1.0f, &w);
  DeviceBuffer<T> da(a.size()), db(b.size()), dw(C), dy(a.size()), dres(a.size());
  DeviceBuffer<float> drstd(N);
  HT_CUDA_ASSERT(da.Upload(ha));
  HT_CUDA_ASSERT(db.Upload(hb));
  HT_CUDA_ASSERT(dw.Upload(hw));
  for (bool residual : {false, true}) {
    HT_CUDA_ASSERT(RmsNormForward<T>(dy.get(), drstd.get(), residual ? dres.get() : nullptr,
                                     da.get(), residual ? db.get() : nullptr, dw.get(), N, C,
                                     float(eps), nullptr));
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    std::vector<double> r = a;
    if (residual) cpu::Add<double>(r.data(), a.data(), b.data(), r.size());
    std::vector<double> y(r.size()), rstd(N);
    cpu::RmsNormForward<double>(y.data(), rstd.data(), r.data(), w.data(), N, C, eps);
    const std::string tag = residual ? "residual " : "plain ";
    ExpectClose(ToDouble(dy.Download()), y, testing::RelTol<T>(), tag + "y");
    ExpectClose(ToDouble(drstd.Download()), rstd, testing::RelTol<T>(), tag + "rstd");
    if (residual) ExpectClose(ToDouble(dres.Download()), r, testing::RelTol<T>(), "res_out");
  }
  // In place: res_out aliases a.
  HT_CUDA_ASSERT(RmsNormForward<T>(dy.get(), drstd.get(), da.get(), da.get(), db.get(), dw.get(),
                                   N, C, float(eps), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> r(a.size()), y(a.size()), rstd(N);
  cpu::Add<double>(r.data(), a.data(), b.data(), r.size());
  cpu::RmsNormForward<double>(y.data(), rstd.data(), r.data(), w.data(), N, C, eps);
  ExpectClose(ToDouble(dy.Download()), y, testing::RelTol<T>(), "in-place y");
  ExpectClose(ToDouble(da.Download()), r, testing::RelTol<T>(), "in-place res");
  }
}

TYPED_TEST(RmsNormTest, BackwardAddsResidualGradAndAccumulatesDw) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  // 96: two-kernel vector path; 98: scalar (98 % 4 != 0); 768 / 2048: the
  // fused one-pass kernel (cols a multiple of 32 lanes x 16 bytes; 2048 in
  // fp32 falls back to two kernels), with more rows than its warps.
  const std::pair<int, int> shapes[] = {{300, 96}, {300, 98}, {5000, 768}, {1100, 2048}};
  for (const auto& [N, C] : shapes) {
  SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
  std::mt19937 rng(5);
  std::vector<double> x, w, g, dres, dw0;
  auto hx = RandomVector<T>(size_t(N) * C, rng, 1.0f, &x);
  auto hw = RandomVector<T>(C, rng, 1.0f, &w);
  auto hg = RandomVector<T>(size_t(N) * C, rng, 1.0f, &g);
  auto hdres = RandomVector<T>(size_t(N) * C, rng, 1.0f, &dres);
  auto hdw0 = RandomVector<float>(C, rng, 1.0f, &dw0);
  std::vector<double> y(x.size()), rstd(N);
  cpu::RmsNormForward<double>(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
  std::vector<float> hrstd(rstd.begin(), rstd.end());
  std::vector<double> rstd_f(hrstd.begin(), hrstd.end());
  DeviceBuffer<T> dx(x.size()), dwt(C), dg(g.size()), ddx(x.size());
  DeviceBuffer<float> drstd(N), ddw(C),
      scratch(RmsNormBackwardScratchFloats(C));
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT(dwt.Upload(hw));
  HT_CUDA_ASSERT(dg.Upload(hg));
  HT_CUDA_ASSERT(ddx.Upload(hdres));  // dx aliases dres
  HT_CUDA_ASSERT(drstd.Upload(hrstd));
  HT_CUDA_ASSERT(ddw.Upload(hdw0));
  HT_CUDA_ASSERT(RmsNormBackward<T>(ddx.get(), ddx.get(), ddw.get(), scratch.get(), dg.get(),
                                    dx.get(), dwt.get(), drstd.get(), N, C, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> rdx = dres, rdw = dw0;
  cpu::RmsNormBackward<double>(rdx.data(), rdw.data(), g.data(), x.data(), w.data(),
                               rstd_f.data(), N, C);
  ExpectClose(ToDouble(ddx.Download()), rdx, testing::RelTol<T>(), "dx");
  ExpectClose(ToDouble(ddw.Download()), rdw, 1e-5, "dw");
  // Deterministic: a second identical pass adds bit-identical dw.
  auto first = ddw.Download();
  HT_CUDA_ASSERT(ddw.Upload(hdw0));
  HT_CUDA_ASSERT(RmsNormBackward<T>(ddx.get(), nullptr, ddw.get(), scratch.get(), dg.get(),
                                    dx.get(), dwt.get(), drstd.get(), N, C, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(first, ddw.Download());
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
