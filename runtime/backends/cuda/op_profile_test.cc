// OpProfile on a real device: time lands in the op it was marked for, a
// disabled profile records nothing, and a backend pass with the profile on
// attributes its time to GEMMs, attention and the other op classes.
// GPU tests skip without a device.
#include "runtime/backends/cuda/op_profile.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "runtime/backends/cuda/backend.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::cuda {
namespace {

TEST(OpProfileCuda, ChargesEachIntervalToItsOp) {
  HT_SKIP_WITHOUT_GPU();
  void* buf = nullptr;
  const size_t bytes = size_t{256} << 20;
  HT_CUDA_OK(cudaMalloc(&buf, bytes));
  cudaStream_t s = nullptr;
  HT_CUDA_OK(cudaStreamCreate(&s));

  OpProfile off;  // never enabled: every call is a no-op
  off.Begin(s);
  off.Mark(Op::kGemm, s);
  ASSERT_TRUE(off.Collect().ok());
  EXPECT_EQ(off.passes(), 0);

  OpProfile p;
  ASSERT_TRUE(p.Enable(16).ok());
  for (int pass = 0; pass < 2; ++pass) {
    p.Begin(s);
    for (int i = 0; i < 8; ++i) HT_CUDA_OK(cudaMemsetAsync(buf, i, bytes, s));  // ~2 GB of writes
    p.Mark(Op::kGemm, s);
    p.Mark(Op::kNorm, s);  // nothing enqueued in between
    HT_CUDA_OK(cudaStreamSynchronize(s));
    ASSERT_TRUE(p.Collect().ok());
  }
  EXPECT_EQ(p.passes(), 2);
  const auto& t = p.total_ms();
  EXPECT_GT(t[static_cast<int>(Op::kGemm)], 0.1);  // 4 GB written takes well over 0.1 ms
  EXPECT_LT(t[static_cast<int>(Op::kNorm)], 0.5 * t[static_cast<int>(Op::kGemm)]);
  EXPECT_EQ(t[static_cast<int>(Op::kAttention)], 0.0);
  EXPECT_NE(p.Summary().find("gemm"), std::string::npos);
  cudaStreamDestroy(s);
  cudaFree(buf);
}

TEST(OpProfileCuda, BackendPassAttributesTimeToOps) {
  HT_SKIP_WITHOUT_GPU();
  model::ModelConfig c;
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;  // head_dim 64
  c.num_key_value_heads = 2;
  c.intermediate_size = 512;
  c.max_context_width = 128;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = true;
  model::BackendOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 128;
  auto b = CudaBackend::Create(c, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE((*b)->op_profile().Enable().ok());
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(0, 511);
  std::vector<int32_t> in(256), tgt(256);
  for (auto& x : in) x = tok(rng);
  for (auto& x : tgt) x = tok(rng);
  model::TokenBatch batch{in.data(), tgt.data(), 2, 128, nullptr};
  model::NoOpUnitHooks hooks;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*b)->ForwardBackward(batch, 1.0f, hooks).ok());
  const OpProfile& p = (*b)->op_profile();
  EXPECT_EQ(p.passes(), 2);  // the first (warm-up) pass is not counted
  for (Op op : {Op::kGemm, Op::kAttention, Op::kNorm, Op::kRope, Op::kSwiGlu, Op::kLmHeadLoss,
                Op::kEmbedding}) {
    EXPECT_GT(p.total_ms()[static_cast<int>(op)], 0.0) << OpName(op);
  }
}

}  // namespace
}  // namespace hypertrain::cuda
