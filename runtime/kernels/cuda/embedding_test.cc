// Embedding forward, deterministic backward and the range-restricted backward
// of HSDP's split embedding gradient vs the CPU reference.
#include "runtime/kernels/cuda/embedding.h"

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
class EmbeddingTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(EmbeddingTest, Types);

TYPED_TEST(EmbeddingTest, ForwardAndDeterministicBackward) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const int V = 1000, C = 136, N = 4096;
  std::mt19937 rng(17);
  // Skewed tokens: many repeats of a few ids (runs of equal tokens), plus
  // the first and last id.
  std::vector<int32_t> tokens(N);
  std::uniform_int_distribution<int> any(0, V - 1), few(0, 7);
  for (int i = 0; i < N; ++i) tokens[i] = (i % 3 == 0) ? any(rng) : few(rng);
  tokens[0] = V - 1;
  tokens[1] = 0;
  std::vector<double> table, dout, dtab0;
  auto htable = RandomVector<T>(size_t(V) * C, rng, 1.0f, &table);
  auto hdout = RandomVector<T>(size_t(N) * C, rng, 1.0f, &dout);
  auto hdtab0 = RandomVector<float>(size_t(V) * C, rng, 1.0f, &dtab0);
  DeviceBuffer<int32_t> dtok(N);
  DeviceBuffer<T> dtable(table.size()), dout_d(dout.size()), dfwd(size_t(N) * C);
  DeviceBuffer<float> dgrad(dtab0.size());
  DeviceBuffer<char> scratch(EmbeddingBackwardScratchBytes(N, V));
  HT_CUDA_ASSERT(dtok.Upload(tokens));
  HT_CUDA_ASSERT(dtable.Upload(htable));
  HT_CUDA_ASSERT(dout_d.Upload(hdout));
  HT_CUDA_ASSERT(dgrad.Upload(hdtab0));
  HT_CUDA_ASSERT(EmbeddingForward<T>(dfwd.get(), dtok.get(), dtable.get(), N, C, nullptr));
  HT_CUDA_ASSERT(EmbeddingBackward<T>(dgrad.get(), dout_d.get(), dtok.get(), N, C, V,
                                      scratch.get(), scratch.size(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> fwd(size_t(N) * C), grad = dtab0;
  cpu::EmbeddingForward<double>(fwd.data(), tokens.data(), table.data(), N, C);
  cpu::EmbeddingBackward<double>(grad.data(), dout.data(), tokens.data(), N, C);
  ExpectClose(ToDouble(dfwd.Download()), fwd, 0.0, "forward (exact copy)");
  ExpectClose(ToDouble(dgrad.Download()), grad, 1e-6, "backward");
  // Bit-identical on a second run.
  const auto first = dgrad.Download();
  HT_CUDA_ASSERT(dgrad.Upload(hdtab0));
  HT_CUDA_ASSERT(EmbeddingBackward<T>(dgrad.get(), dout_d.get(), dtok.get(), N, C, V,
                                      scratch.get(), scratch.size(), nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(first, dgrad.Download());
}

// HSDP's split embedding gradient: 3 ranks' rows, a flat range cut mid-row at
// both ends, fp32 and bf16 reduce semantics, against cpu::EmbeddingBackwardRange
// (same order of operations, so equal up to nothing but the conversion of
// dout to float, which is exact); elements outside the range stay untouched.
TYPED_TEST(EmbeddingTest, RangeRestrictedBackwardOfGatheredRanks) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const int V = 1000, C = 136, n = 1500, R = 3;
  const int64_t lo = 3 * C + 17, hi = 700 * int64_t{C} + 5, guard = 64;
  std::mt19937 rng(23);
  std::vector<int32_t> tokens(n * R);
  std::uniform_int_distribution<int> any(0, V - 1), few(0, 7);
  for (int i = 0; i < n * R; ++i) tokens[i] = (i % 3 == 0) ? any(rng) : few(rng) + 3;
  tokens[5] = tokens[n + 5] = tokens[2 * n + 5] = 3;  // row 3 (cut at lo) in every rank
  tokens[7] = tokens[2 * n + 8] = 700;                // row 700 (cut at hi)
  std::vector<double> dout_d, dst0_d;
  auto hdout = RandomVector<T>(size_t(n) * R * C, rng, 1.0f, &dout_d);
  auto hdst0 = RandomVector<float>(size_t(hi - lo + 2 * guard), rng, 1.0f, &dst0_d);
  const std::vector<float> dout_f(dout_d.begin(), dout_d.end());
  DeviceBuffer<int32_t> dtok(tokens.size());
  DeviceBuffer<T> ddout(hdout.size());
  DeviceBuffer<float> ddst(hdst0.size());
  DeviceBuffer<char> scratch(EmbeddingBackwardScratchBytes(n * R, V));
  HT_CUDA_ASSERT(dtok.Upload(tokens));
  HT_CUDA_ASSERT(ddout.Upload(hdout));
  for (bool bf16 : {false, true}) {
    HT_CUDA_ASSERT(ddst.Upload(hdst0));
    HT_CUDA_ASSERT(EmbeddingBackwardRange<T>(ddst.get() + guard, lo, hi, ddout.get(), dtok.get(), n,
                                             R, C, V, bf16, scratch.get(), scratch.size(),
                                             nullptr));
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    std::vector<float> want = hdst0;
    cpu::EmbeddingBackwardRange<float>(want.data() + guard, lo, hi, dout_f.data(), tokens.data(), n,
                                       R, C, bf16);
    const std::vector<float> got = ddst.Download();
    int64_t mismatched = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatched += got[i] != want[i];
    for (int64_t i = 0; i < guard; ++i) {
      ASSERT_EQ(got[i], hdst0[i]) << "before the range";
      ASSERT_EQ(got[got.size() - 1 - i], hdst0[got.size() - 1 - i]) << "after the range";
    }
    ExpectClose(ToDouble(got), ToDouble(want), 1e-6,
                bf16 ? "range backward, bf16 reduce" : "range backward");
    EXPECT_LE(mismatched, 0) << "elements not bit-identical to the CPU reference (bf16=" << bf16
                             << ")";
    // Bit-identical on a second run.
    HT_CUDA_ASSERT(ddst.Upload(hdst0));
    HT_CUDA_ASSERT(EmbeddingBackwardRange<T>(ddst.get() + guard, lo, hi, ddout.get(), dtok.get(), n,
                                             R, C, V, bf16, scratch.get(), scratch.size(),
                                             nullptr));
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_EQ(got, ddst.Download());
  }
  // An empty range is a no-op; a range past the table is an error.
  EXPECT_EQ(EmbeddingBackwardRange<T>(ddst.get(), 5, 5, ddout.get(), dtok.get(), n, R, C, V, false,
                                      scratch.get(), scratch.size(), nullptr),
            cudaSuccess);
  EXPECT_EQ(EmbeddingBackwardRange<T>(ddst.get(), 0, int64_t{V} * C + 1, ddout.get(), dtok.get(), n,
                                      R, C, V, false, scratch.get(), scratch.size(), nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
