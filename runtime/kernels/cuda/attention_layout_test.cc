// CUDA attention: fused-QKV strides give bitwise the dense results and leave
// row padding untouched; backward is bitwise deterministic; bad arguments get
// clear errors (those checks need no GPU).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/attention.h"
#include "runtime/kernels/cuda/attention_internal.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using internal::Impl;

AttentionParams MakeParams(int b, int t, int h, int kv, int d) {
  AttentionParams p;
  p.batch = b;
  p.seq = t;
  p.n_heads = h;
  p.n_kv_heads = kv;
  p.head_dim = d;
  p.scale = 1.0f / std::sqrt(float(d));
  p.dtype = AttentionDtype::kBf16;
  return p;
}

std::vector<uint16_t> RandomBf16(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = __nv_bfloat16_raw(__float2bfloat16_rn(dist(rng))).x;
  return out;
}

class DeviceVec {
 public:
  explicit DeviceVec(size_t elems16) : n_(elems16) {
    if (cudaMalloc(&ptr_, n_ * 2) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceVec() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  uint16_t* get() const { return static_cast<uint16_t*>(ptr_); }
  std::vector<uint16_t> Download() const {
    std::vector<uint16_t> h(n_);
    EXPECT_EQ(cudaSuccess, cudaMemcpy(h.data(), ptr_, n_ * 2, cudaMemcpyDeviceToHost));
    return h;
  }
  void Upload(const std::vector<uint16_t>& h) {
    EXPECT_EQ(cudaSuccess, cudaMemcpy(ptr_, h.data(), n_ * 2, cudaMemcpyHostToDevice));
  }

 private:
  void* ptr_ = nullptr;
  size_t n_;
};

// First index where a and b differ, or -1.
int64_t FirstDifference(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return int64_t(i);
  }
  return -1;
}

class AttentionLayout : public ::testing::TestWithParam<Impl> {};

TEST_P(AttentionLayout, FusedQkvStridesMatchDenseBitwiseAndBackwardIsDeterministic) {
  HT_SKIP_WITHOUT_GPU();
  const Impl impl = GetParam();
  const int B = 2, T = 150, H = 6, KV = 2, D = 64;
  const AttentionParams dense = MakeParams(B, T, H, KV, D);
  const size_t rows = size_t(B) * T;
  const size_t nq = rows * H * D, nkv = rows * KV * D, nstat = size_t(B) * H * T;
  std::mt19937 rng(42);
  const auto q = RandomBf16(rng, nq), k = RandomBf16(rng, nkv), v = RandomBf16(rng, nkv);
  const auto dout = RandomBf16(rng, nq);

  // Dense run, twice for determinism.
  DeviceVec dq_in(nq), dk_in(nkv), dv_in(nkv), d_out(nq), d_dout(nq);
  DeviceVec d_dq(nq), d_dk(nkv), d_dv(nkv);
  float* lse = nullptr;
  void* ws = nullptr;
  const size_t ws_bytes = AttentionBackwardWorkspaceBytes(dense);
  HT_CUDA_OK(cudaMalloc(&lse, nstat * 4));
  HT_CUDA_OK(cudaMalloc(&ws, ws_bytes));
  dq_in.Upload(q);
  dk_in.Upload(k);
  dv_in.Upload(v);
  d_dout.Upload(dout);
  Status st = internal::Forward(impl, dense, dq_in.get(), dk_in.get(), dv_in.get(), d_out.get(),
                                lse, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<uint16_t> grads[2][3];
  for (int run = 0; run < 2; ++run) {
    HT_CUDA_OK(cudaMemset(d_dq.get(), 0xFF, nq * 2));
    HT_CUDA_OK(cudaMemset(d_dk.get(), 0xFF, nkv * 2));
    HT_CUDA_OK(cudaMemset(d_dv.get(), 0xFF, nkv * 2));
    st = internal::Backward(impl, dense, dq_in.get(), dk_in.get(), dv_in.get(), d_out.get(),
                            d_dout.get(), lse, d_dq.get(), d_dk.get(), d_dv.get(), ws, ws_bytes,
                            nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_OK(cudaDeviceSynchronize());
    grads[run][0] = d_dq.Download();
    grads[run][1] = d_dk.Download();
    grads[run][2] = d_dv.Download();
  }
  const char* names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(FirstDifference(grads[0][i], grads[1][i]), -1)
        << names[i] << " differs between two identical backward runs";
  }
  const std::vector<uint16_t> dense_out = d_out.Download();

  // Fused layout: one [rows, (H + 2KV) * D] buffer for q|k|v and one for their
  // gradients; out/dout rows padded by 8 sentinel elements.
  const int64_t qkv_w = int64_t(H + 2 * KV) * D, o_w = int64_t(H) * D + 8;
  std::vector<uint16_t> qkv(rows * qkv_w), dout_p(rows * o_w, 0x1234);
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(&qkv[r * qkv_w], &q[r * H * D], H * D * 2);
    std::memcpy(&qkv[r * qkv_w + H * D], &k[r * KV * D], KV * D * 2);
    std::memcpy(&qkv[r * qkv_w + (H + KV) * D], &v[r * KV * D], KV * D * 2);
    std::memcpy(&dout_p[r * o_w], &dout[r * H * D], H * D * 2);
  }
  DeviceVec d_qkv(rows * qkv_w), d_dqkv(rows * qkv_w), d_out_p(rows * o_w), d_dout_p(rows * o_w);
  d_qkv.Upload(qkv);
  d_dout_p.Upload(dout_p);
  std::vector<uint16_t> sentinel(rows * o_w, 0x7E57);
  d_out_p.Upload(sentinel);
  HT_CUDA_OK(cudaMemset(d_dqkv.get(), 0xFF, rows * qkv_w * 2));
  AttentionParams fused = dense;
  fused.q_row_stride = fused.k_row_stride = fused.v_row_stride = qkv_w;
  fused.o_row_stride = o_w;
  uint16_t* base = d_qkv.get();
  uint16_t* gbase = d_dqkv.get();
  st = internal::Forward(impl, fused, base, base + H * D, base + (H + KV) * D, d_out_p.get(), lse,
                         nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = internal::Backward(impl, fused, base, base + H * D, base + (H + KV) * D, d_out_p.get(),
                          d_dout_p.get(), lse, gbase, gbase + H * D, gbase + (H + KV) * D, ws,
                          ws_bytes, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> out_p = d_out_p.Download(), dqkv = d_dqkv.Download();
  for (size_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < o_w; ++c) {
      const uint16_t got = out_p[r * o_w + c];
      if (c < H * D) {
        ASSERT_EQ(got, dense_out[r * H * D + c]) << "out row " << r << " col " << c;
      } else {
        ASSERT_EQ(got, 0x7E57) << "padding of out row " << r << " col " << c << " was written";
      }
    }
    for (int64_t c = 0; c < qkv_w; ++c) {
      uint16_t want;
      if (c < H * D) {
        want = grads[0][0][r * H * D + c];
      } else if (c < (H + KV) * D) {
        want = grads[0][1][r * KV * D + (c - H * D)];
      } else {
        want = grads[0][2][r * KV * D + (c - (H + KV) * D)];
      }
      ASSERT_EQ(dqkv[r * qkv_w + c], want) << "dqkv row " << r << " col " << c;
    }
  }
  cudaFree(lse);
  cudaFree(ws);
}

// The tiled forward's two tilings (1 or 2 m-tiles of 16 rows per warp) do the
// same arithmetic per row, so their outputs must match bitwise.
TEST(AttentionLayoutTiled, ForwardTilingsAgreeBitwise) {
  HT_SKIP_WITHOUT_GPU();
  for (int d : {32, 64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    const int B = 2, T = 333, H = 8, KV = 2;
    const AttentionParams p = MakeParams(B, T, H, KV, d);
    const size_t nq = size_t(B) * T * H * d, nkv = size_t(B) * T * KV * d;
    std::mt19937 rng(d);
    DeviceVec q(nq), k(nkv), v(nkv), out1(nq), out2(nq);
    q.Upload(RandomBf16(rng, nq));
    k.Upload(RandomBf16(rng, nkv));
    v.Upload(RandomBf16(rng, nkv));
    HT_CUDA_OK(cudaMemset(out1.get(), 0xFF, nq * 2));
    HT_CUDA_OK(cudaMemset(out2.get(), 0xFF, nq * 2));
    Status st = internal::Forward(Impl::kTiled, p, q.get(), k.get(), v.get(), out1.get(), nullptr,
                                  nullptr, 1);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = internal::Forward(Impl::kTiled, p, q.get(), k.get(), v.get(), out2.get(), nullptr,
                           nullptr, 2);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint16_t> a = out1.Download(), b = out2.Download();
    const int64_t diff = FirstDifference(a, b);
    EXPECT_EQ(diff, -1) << "first difference at " << diff;
    // And the output was written (not both left at the NaN poison).
    EXPECT_NE(a[0], 0xFFFF);
    EXPECT_NE(a[nq - 1], 0xFFFF);
  }
}

INSTANTIATE_TEST_SUITE_P(AllImpls, AttentionLayout, ::testing::Values(Impl::kSimple, Impl::kTiled),
                         [](const ::testing::TestParamInfo<Impl>& info) {
                           return std::string(AttentionImplName(info.param));
                         });

// ---- argument checks: no GPU needed --------------------------------------

void ExpectInvalid(const AttentionParams& p, const std::string& needle) {
  const Status st = ValidateAttentionParams(p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << needle;
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(AttentionArgs, RejectsBadShapes) {
  EXPECT_TRUE(ValidateAttentionParams(MakeParams(1, 5, 4, 2, 64)).ok());
  EXPECT_TRUE(ValidateAttentionParams(MakeParams(3, 8192, 32, 8, 128)).ok());
  ExpectInvalid(MakeParams(0, 5, 4, 2, 64), "batch");
  ExpectInvalid(MakeParams(1, 0, 4, 2, 64), "seq");
  ExpectInvalid(MakeParams(1, 5, 4, 3, 64), "multiple of n_kv_heads");
  ExpectInvalid(MakeParams(1, 5, 0, 1, 64), "n_heads");
  ExpectInvalid(MakeParams(1, 5, 4, 2, 96), "head_dim must be 32, 64 or 128");
  AttentionParams p = MakeParams(1, 5, 4, 2, 64);
  p.scale = 0.0f;
  ExpectInvalid(p, "scale");
  p = MakeParams(1, 5, 4, 2, 64);
  p.dtype = static_cast<AttentionDtype>(7);
  ExpectInvalid(p, "dtype must be bf16, fp16 or fp32");
  p = MakeParams(1, 5, 4, 2, 64);
  p.q_row_stride = 4 * 64 - 8;  // narrower than the heads
  ExpectInvalid(p, "q_row_stride");
  p = MakeParams(1, 5, 4, 2, 64);
  p.k_row_stride = 2 * 64 + 4;  // not a multiple of 8
  ExpectInvalid(p, "k_row_stride");
  p = MakeParams(1, 5, 4, 2, 64);
  p.cudnn_bwd_workspace_cap_bytes = 0;
  ExpectInvalid(p, "cudnn_bwd_workspace_cap_bytes");
}

TEST(AttentionArgs, RejectsNullMisalignedPointersAndSmallWorkspace) {
  const AttentionParams p = MakeParams(1, 5, 4, 2, 64);
  alignas(16) static uint16_t buf[64];
  alignas(16) static float fbuf[64];
  Status st = AttentionForward(p, nullptr, buf, buf, buf, fbuf, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("q is null"), std::string::npos) << st.message();
  st = AttentionForward(p, buf, buf + 1, buf, buf, fbuf, nullptr);
  EXPECT_NE(st.message().find("k must be 16-byte aligned"), std::string::npos) << st.message();
  const size_t need = AttentionBackwardWorkspaceBytes(p);
  EXPECT_GE(need, sizeof(float) * 4 * 5);
  EXPECT_EQ(need % 256, 0u);
  st = AttentionBackward(p, buf, buf, buf, buf, buf, fbuf, buf, buf, buf, buf, need - 1, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("workspace"), std::string::npos) << st.message();
  st = AttentionBackward(p, buf, buf, buf, buf, buf, nullptr, buf, buf, buf, buf, need, nullptr);
  EXPECT_NE(st.message().find("lse is null"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
