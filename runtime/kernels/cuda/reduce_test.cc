// Grad-norm reductions, the non-finite flag and casts.
#include "runtime/kernels/cuda/reduce.h"

#include <gtest/gtest.h>

#include <limits>

#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cuda/cast.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::RandomVector;

TEST(Reduce, SumSquaresMatchesReferenceAndIsDeterministic) {
  HT_SKIP_WITHOUT_GPU();
  const size_t n = (size_t{3} << 20) + 11;
  std::mt19937 rng(23);
  std::vector<double> ref;
  auto hx = RandomVector<float>(n, rng, 1.0f, &ref);
  DeviceBuffer<float> dx(n);
  DeviceBuffer<double> partials(2 * kSumSquaresPartials), out(1);
  HT_CUDA_ASSERT(dx.Upload(hx));
  // Two ranges into one partial buffer, then one sum: how the grad norm runs.
  HT_CUDA_ASSERT(SumSquaresPartials(dx.get(), n / 2, partials.get(), nullptr));
  HT_CUDA_ASSERT(SumSquaresPartials(dx.get() + n / 2, n - n / 2,
                                    partials.get() + kSumSquaresPartials, nullptr));
  HT_CUDA_ASSERT(SumDoubles(partials.get(), 2 * kSumSquaresPartials, out.get(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const double got = out.Download()[0];
  const double want = cpu::SumSquares<double>(ref.data(), n);
  EXPECT_NEAR(got, want, 1e-12 * want);
  HT_CUDA_ASSERT(SumSquaresPartials(dx.get(), n / 2, partials.get(), nullptr));
  HT_CUDA_ASSERT(SumDoubles(partials.get(), 2 * kSumSquaresPartials, out.get(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(got, out.Download()[0]);
}

TEST(Reduce, NonFiniteFlagAndSumSquaresPropagateInfAndNan) {
  HT_SKIP_WITHOUT_GPU();
  const size_t n = 100000;
  std::mt19937 rng(29);
  auto hx = RandomVector<float>(n, rng, 1.0f, nullptr);
  DeviceBuffer<float> dx(n);
  DeviceBuffer<int> flag(1);
  DeviceBuffer<double> partials(kSumSquaresPartials), out(1);
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT(cudaMemset(flag.get(), 0, sizeof(int)));
  HT_CUDA_ASSERT(FlagNonFinite(dx.get(), n, flag.get(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(flag.Download()[0], 0);
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    auto h = hx;
    h[n - 3] = bad;
    HT_CUDA_ASSERT(dx.Upload(h));
    HT_CUDA_ASSERT(FlagNonFinite(dx.get(), n, flag.get(), nullptr));
    HT_CUDA_ASSERT(SumSquaresPartials(dx.get(), n, partials.get(), nullptr));
    HT_CUDA_ASSERT(SumDoubles(partials.get(), kSumSquaresPartials, out.get(), nullptr));
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_EQ(flag.Download()[0], 1) << bad;
    EXPECT_FALSE(std::isfinite(out.Download()[0])) << bad;
    HT_CUDA_ASSERT(cudaMemset(flag.get(), 0, sizeof(int)));
  }
}

TEST(Cast, Fp32ToBf16AndFp16RoundToNearest) {
  HT_SKIP_WITHOUT_GPU();
  const size_t n = 70001;
  std::mt19937 rng(31);
  auto hx = RandomVector<float>(n, rng, 3.0f, nullptr);
  DeviceBuffer<float> dx(n), back(n);
  DeviceBuffer<__nv_bfloat16> b(n);
  DeviceBuffer<__half> h(n);
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT((Cast<__nv_bfloat16, float>(b.get(), dx.get(), n, nullptr)));
  HT_CUDA_ASSERT((Cast<__half, float>(h.get(), dx.get(), n, nullptr)));
  HT_CUDA_ASSERT((Cast<float, __nv_bfloat16>(back.get(), b.get(), n, nullptr)));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const auto hb = b.Download();
  const auto hh = h.Download();
  const auto hback = back.Download();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(__bfloat162float(hb[i]), __bfloat162float(__float2bfloat16_rn(hx[i]))) << i;
    ASSERT_EQ(__half2float(hh[i]), __half2float(__float2half_rn(hx[i]))) << i;
    ASSERT_EQ(hback[i], __bfloat162float(hb[i])) << i;
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
