// fp32 causal GQA attention (the CUDA backend's fp32/tf32 path) vs the CPU
// reference, forward and backward, on strided fused-QKV input.
#include "runtime/kernels/cuda/naive_attention_f32.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomVector;

TEST(NaiveAttentionF32, ForwardAndBackwardMatchReference) {
  HT_SKIP_WITHOUT_GPU();
  for (const int D : {32, 64}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    const int B = 2, S = 37, H = 4, KV = 2, W = (H + 2 * KV) * D;
    std::mt19937 rng(41 + D);
    std::vector<double> qkv, dout;
    auto hqkv = RandomVector<float>(size_t(B) * S * W, rng, 1.0f, &qkv);
    auto hdout = RandomVector<float>(size_t(B) * S * H * D, rng, 1.0f, &dout);
    DeviceBuffer<float> dqkv_in(qkv.size()), out(dout.size()), lse(size_t(B) * H * S),
        ddout(dout.size()), grads(qkv.size()), scratch(size_t(B) * H * S);
    HT_CUDA_ASSERT(dqkv_in.Upload(hqkv));
    HT_CUDA_ASSERT(ddout.Upload(hdout));
    AttentionParams p;
    p.batch = B, p.seq = S, p.n_heads = H, p.n_kv_heads = KV, p.head_dim = D;
    p.scale = 1.0f / std::sqrt(float(D));
    p.q_row_stride = p.k_row_stride = p.v_row_stride = W;
    const float* q = dqkv_in.get();
    const float* k = q + H * D;
    const float* v = k + KV * D;
    auto st = NaiveAttentionForwardF32(p, q, k, v, out.get(), lse.get(), nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = NaiveAttentionBackwardF32(p, q, k, v, out.get(), ddout.get(), lse.get(), grads.get(),
                                   grads.get() + H * D, grads.get() + (H + KV) * D, scratch.get(),
                                   nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_ASSERT(cudaDeviceSynchronize());

    // Dense copies for the reference.
    std::vector<double> rq(size_t(B) * S * H * D), rk(size_t(B) * S * KV * D), rv(rk.size());
    for (size_t t = 0; t < size_t(B) * S; ++t) {
      for (int j = 0; j < H * D; ++j) rq[t * H * D + j] = qkv[t * W + j];
      for (int j = 0; j < KV * D; ++j) {
        rk[t * KV * D + j] = qkv[t * W + H * D + j];
        rv[t * KV * D + j] = qkv[t * W + (H + KV) * D + j];
      }
    }
    std::vector<double> rout(rq.size()), rlse(size_t(B) * H * S);
    cpu::AttentionForward<double>(rout.data(), rlse.data(), rq.data(), rk.data(), rv.data(), B, S,
                                  H, KV, D);
    ExpectClose(testing::ToDouble(out.Download()), rout, 1e-5, "out");
    ExpectClose(testing::ToDouble(lse.Download()), rlse, 1e-5, "lse");
    std::vector<double> dq(rq.size(), 0.0), dk(rk.size(), 0.0), dv(rv.size(), 0.0);
    cpu::AttentionBackward<double>(dq.data(), dk.data(), dv.data(), dout.data(), rq.data(),
                                   rk.data(), rv.data(), rout.data(), rlse.data(), B, S, H, KV, D);
    std::vector<double> expect(qkv.size());
    for (size_t t = 0; t < size_t(B) * S; ++t) {
      for (int j = 0; j < H * D; ++j) expect[t * W + j] = dq[t * H * D + j];
      for (int j = 0; j < KV * D; ++j) {
        expect[t * W + H * D + j] = dk[t * KV * D + j];
        expect[t * W + (H + KV) * D + j] = dv[t * KV * D + j];
      }
    }
    ExpectClose(testing::ToDouble(grads.Download()), expect, 1e-4, "dq|dk|dv");
  }
}

TEST(NaiveAttentionF32, RejectsBadHeadDim) {
  AttentionParams p;
  p.batch = 1, p.seq = 4, p.n_heads = 2, p.n_kv_heads = 1, p.head_dim = 48, p.scale = 0.1f;
  const Status st = NaiveAttentionForwardF32(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("head_dim 48"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
