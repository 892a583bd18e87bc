// RoPE (rotate-half, llama3 scaling) forward/backward vs the CPU reference,
// including the strided fused-QKV form.
#include "runtime/kernels/cuda/rope.h"

#include <gtest/gtest.h>

#include "runtime/backends/cpu/ops.h"
#include "runtime/model/math.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomVector;
using testing::ToDouble;

template <typename T>
class RopeTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(RopeTest, Types);

TYPED_TEST(RopeTest, StridedForwardAndBackwardMatchReference) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const int D : {64, 36}) {  // 16-byte path; scalar path (D/2 = 18)
  SCOPED_TRACE("D=" + std::to_string(D));
  const int B = 2, S = 300, H = 4, width = 3 * H * D;  // [q | k | v]-like rows
  model::RopeScaling sc;
  sc.type = model::RopeScalingType::kLlama3;
  sc.factor = 32;
  sc.low_freq_factor = 1;
  sc.high_freq_factor = 4;
  sc.original_max_position_embeddings = 64;  // so all three regimes occur
  std::vector<double> inv_freq(D / 2);
  model::RopeInvFreq(inv_freq.data(), D, 500000.0, sc);
  const auto table = RopeCosSinTable(inv_freq, S);
  std::vector<double> cos(size_t(S) * D / 2), sin(cos.size());
  cpu::RopeTables<double>(cos.data(), sin.data(), S, D, 500000.0, sc);

  std::mt19937 rng(9);
  std::vector<double> in;
  auto hin = RandomVector<T>(size_t(B) * S * width, rng, 1.0f, &in);
  DeviceBuffer<T> din(in.size()), dout(size_t(B) * S * H * D), dback(in.size());
  DeviceBuffer<float> dtable(table.size());
  HT_CUDA_ASSERT(din.Upload(hin));
  HT_CUDA_ASSERT(dback.Upload(hin));
  HT_CUDA_ASSERT(cudaMemcpy(dtable.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  // Rotate the middle H heads of each row (the "k" slice) into a dense buffer.
  const int off = H * D;
  HT_CUDA_ASSERT(RopeForward<T>(dout.get(), H * D, din.get() + off, width, dtable.get(), B * S, S,
                                H, D, nullptr));
  // Backward in place on the strided slice.
  HT_CUDA_ASSERT(RopeBackward<T>(dback.get() + off, width, dback.get() + off, width, dtable.get(),
                                 B * S, S, H, D, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());

  std::vector<double> slice(size_t(B) * S * H * D);
  for (size_t t = 0; t < size_t(B) * S; ++t)
    for (int j = 0; j < H * D; ++j) slice[t * H * D + j] = in[t * width + off + j];
  std::vector<double> fwd(slice.size()), bwd(slice.size());
  cpu::RopeForward<double>(fwd.data(), slice.data(), cos.data(), sin.data(), B, S, H, D);
  cpu::RopeBackward<double>(bwd.data(), slice.data(), cos.data(), sin.data(), B, S, H, D);
  ExpectClose(ToDouble(dout.Download()), fwd, testing::RelTol<T>(), "forward");
  std::vector<double> expect = in;
  for (size_t t = 0; t < size_t(B) * S; ++t)
    for (int j = 0; j < H * D; ++j) expect[t * width + off + j] = bwd[t * H * D + j];
  ExpectClose(ToDouble(dback.Download()), expect, testing::RelTol<T>(), "backward");
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
