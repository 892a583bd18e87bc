// Embedding forward and deterministic backward vs the CPU reference.
#include "runtime/kernels/cuda/embedding.h"

#include <gtest/gtest.h>

#include "runtime/cpu/ops.h"
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

}  // namespace
}  // namespace hypertrain::kernels::cuda
