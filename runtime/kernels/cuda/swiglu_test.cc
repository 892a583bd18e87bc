// SwiGLU forward/backward on a fused [gate | up] buffer vs the CPU reference.
#include "runtime/kernels/cuda/swiglu.h"

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
class SwiGluTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(SwiGluTest, Types);

TYPED_TEST(SwiGluTest, FusedGateUpForwardAndInPlaceBackward) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const int F : {160, 163}) {  // vector and scalar paths
  SCOPED_TRACE("F=" + std::to_string(F));
  const int N = 123;
  std::mt19937 rng(13);
  std::vector<double> gu, dout;
  auto hgu = RandomVector<T>(size_t(N) * 2 * F, rng, 2.0f, &gu);
  auto hdout = RandomVector<T>(size_t(N) * F, rng, 1.0f, &dout);
  DeviceBuffer<T> dgu(gu.size()), dres(size_t(N) * F), ddout(dout.size());
  HT_CUDA_ASSERT(dgu.Upload(hgu));
  HT_CUDA_ASSERT(ddout.Upload(hdout));
  HT_CUDA_ASSERT(SwiGluForward<T>(dres.get(), F, dgu.get(), dgu.get() + F, 2 * F, N, F, nullptr));
  // Backward overwrites gate/up with their gradients.
  HT_CUDA_ASSERT(SwiGluBackward<T>(dgu.get(), dgu.get() + F, 2 * F, ddout.get(), F, dgu.get(),
                                   dgu.get() + F, 2 * F, N, F, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> g(size_t(N) * F), u(g.size());
  for (int n = 0; n < N; ++n)
    for (int f = 0; f < F; ++f) {
      g[size_t(n) * F + f] = gu[size_t(n) * 2 * F + f];
      u[size_t(n) * F + f] = gu[size_t(n) * 2 * F + F + f];
    }
  std::vector<double> out(g.size()), dg(g.size(), 0.0), du(g.size(), 0.0);
  cpu::SwiGluForward<double>(out.data(), g.data(), u.data(), g.size());
  cpu::SwiGluBackward<double>(dg.data(), du.data(), dout.data(), g.data(), u.data(), g.size());
  ExpectClose(ToDouble(dres.Download()), out, testing::RelTol<T>(), "out");
  std::vector<double> expect(gu.size());
  for (int n = 0; n < N; ++n)
    for (int f = 0; f < F; ++f) {
      expect[size_t(n) * 2 * F + f] = dg[size_t(n) * F + f];
      expect[size_t(n) * 2 * F + F + f] = du[size_t(n) * F + f];
    }
  ExpectClose(ToDouble(dgu.Download()), expect, testing::RelTol<T>(), "dgate|dup");
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
