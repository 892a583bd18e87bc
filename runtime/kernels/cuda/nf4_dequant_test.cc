// NF4 dequantisation on the device vs model::DequantizeNf4 on random tensors
// (several double-quantisation groups, an odd length, an all-zero block):
// fp32 bit for bit, bf16 the CPU's value rounded to nearest even.
#include "runtime/kernels/cuda/nf4_dequant.h"

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/kernels/cuda/test_util.h"
#include "runtime/model/nf4.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;

TEST(Nf4DequantTest, DeviceIsTheCpuReferenceBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  const int64_t n = 64 * 256 * 3 + 64 * 7 + 29;  // 3+ groups, a partial last block, odd
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float& x : w) x = d(rng);
  for (int i = 64 * 5; i < 64 * 6; ++i) w[i] = 0.0f;  // an all-zero block
  for (int i = 64 * 9; i < 64 * 10; ++i) w[i] *= 40.0f;  // a wide one
  const model::Nf4Tensor q = model::QuantizeNf4(w.data(), n);
  std::vector<float> ref(n);
  model::DequantizeNf4(q, 0, n, ref.data());

  DeviceBuffer<uint8_t> codes(q.codes.size());
  DeviceBuffer<int8_t> sc(q.scale_codes.size());
  DeviceBuffer<float> sa(q.scale_absmax.size()), out32(n);
  DeviceBuffer<__nv_bfloat16> out16(n);
  HT_CUDA_ASSERT(codes.Upload(q.codes));
  HT_CUDA_ASSERT(sc.Upload(q.scale_codes));
  HT_CUDA_ASSERT(sa.Upload(q.scale_absmax));
  Nf4View v{codes.get(), sc.get(), sa.get(), q.scale_offset, n};
  HT_CUDA_ASSERT(Nf4Dequantize<float>(out32.get(), v, model::kNf4Codebook, nullptr));
  HT_CUDA_ASSERT(Nf4Dequantize<__nv_bfloat16>(out16.get(), v, model::kNf4Codebook, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<float> got = out32.Download();
  const std::vector<__nv_bfloat16> got16 = out16.Download();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], ref[i]) << "element " << i;
    ASSERT_EQ(__bfloat162float(got16[i]), __bfloat162float(__float2bfloat16_rn(ref[i])))
        << "element " << i;
  }
  EXPECT_EQ(got[64 * 5 + 3], ref[64 * 5 + 3]);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
