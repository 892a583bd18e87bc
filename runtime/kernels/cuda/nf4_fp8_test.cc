// NF4 -> e4m3 in one pass against the CPU reference (model::DequantizeNf4,
// rounded to bf16, times the scale, cpu::Fp8Encode) and against the two-pass
// device path it replaces (Nf4Dequantize<bf16> then Fp8Cast), byte for byte:
// random weights over several double-quantisation groups, an all-zero and a
// wide block, an odd length, a scale that saturates the wide block, and
// misaligned pointers (the scalar path).
#include "runtime/kernels/cuda/nf4_fp8.h"

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/model/nf4.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;

struct Case {
  model::Nf4Tensor q;
  std::vector<uint8_t> expected;  // the CPU reference's codes
};

Case MakeCase(int64_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float& x : w) x = d(rng);
  for (int i = 64 * 5; i < 64 * 6; ++i) w[i] = 0.0f;    // an all-zero block
  for (int i = 64 * 9; i < 64 * 10; ++i) w[i] *= 40.0f;  // a wide one: saturates at the scale
  Case c{model::QuantizeNf4(w.data(), n), {}};
  std::vector<float> deq(n);
  model::DequantizeNf4(c.q, 0, n, deq.data());
  c.expected.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = __bfloat162float(__float2bfloat16_rn(deq[i]));
    c.expected[i] = cpu::Fp8Encode(v * scale, model::Fp8Format::kE4M3);
  }
  return c;
}

// Runs both device paths with the codes at byte offset `code_shift` and the
// output at `out_shift`; returns {one pass, two passes}.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> RunDevice(const model::Nf4Tensor& q,
                                                                float scale, int code_shift,
                                                                int out_shift) {
  const int64_t n = q.numel;
  std::vector<uint8_t> codes(code_shift, 0);
  codes.insert(codes.end(), q.codes.begin(), q.codes.end());
  DeviceBuffer<uint8_t> dcodes(codes.size()), one(n + out_shift), two(n);
  DeviceBuffer<int8_t> sc(q.scale_codes.size());
  DeviceBuffer<float> sa(q.scale_absmax.size()), dscale(1);
  DeviceBuffer<__nv_bfloat16> bf16(n);
  EXPECT_EQ(dcodes.Upload(codes), cudaSuccess);
  EXPECT_EQ(sc.Upload(q.scale_codes), cudaSuccess);
  EXPECT_EQ(sa.Upload(q.scale_absmax), cudaSuccess);
  EXPECT_EQ(dscale.Upload(std::vector<float>{scale}), cudaSuccess);
  const Nf4View v{dcodes.get() + code_shift, sc.get(), sa.get(), q.scale_offset, n};
  EXPECT_EQ(Nf4ToFp8E4m3(one.get() + out_shift, v, model::kNf4Codebook, dscale.get(), nullptr),
            cudaSuccess);
  EXPECT_EQ(Nf4Dequantize<__nv_bfloat16>(bf16.get(), v, model::kNf4Codebook, nullptr), cudaSuccess);
  EXPECT_EQ(Fp8Cast<__nv_bfloat16>(two.get(), bf16.get(), n, dscale.get(), nullptr,
                                   Fp8Format::kE4M3, nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> a = one.Download();
  a.erase(a.begin(), a.begin() + out_shift);
  return {a, two.Download()};
}

TEST(Nf4Fp8Test, OnePassIsTheCpuReferenceAndTheTwoPassPathByteForByte) {
  HT_SKIP_WITHOUT_GPU();
  const float scale = 4096.0f;  // 448 / 4096 ~ 0.11: the wide block saturates, small values go subnormal
  for (const int64_t n : {int64_t{64} * 256 * 3 + 64 * 7 + 29, int64_t{64} * 256 * 2}) {
    const Case c = MakeCase(n, scale, static_cast<unsigned>(n));
    for (const auto& [code_shift, out_shift] : {std::pair{0, 0}, std::pair{1, 0}, std::pair{0, 3}}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << ", code shift " << code_shift
                                        << ", out shift " << out_shift);
      const auto [one, two] = RunDevice(c.q, scale, code_shift, out_shift);
      ASSERT_EQ(one.size(), static_cast<size_t>(n));
      int saturated = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(one[i], c.expected[i]) << "element " << i << " vs the CPU reference";
        ASSERT_EQ(one[i], two[i]) << "element " << i << " vs the two-pass path";
        saturated += (one[i] & 0x7F) == 0x7E;  // +-448
      }
      EXPECT_GT(saturated, 0) << "the wide block should saturate at this scale";
    }
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
