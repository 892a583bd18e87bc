// Block gradients kept in freed activation memory (BackendOptions::
// single_pass_grads, CudaOptions::share_grads_with_activations): a backend
// that shares must train exactly like one with its own gradient buffers
// (same losses, gradients and weights, bit for bit), hold less memory, and
// refuse what sharing cannot serve: a second pass without ZeroGrads
// (gradient accumulation) and reading gradients after a forward-only Loss()
// overwrote them. Modes whose per-layer activations cannot hold a block's
// gradient (full checkpointing) fall back to own buffers. GPU tests skip
// without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/backends/cuda/backend.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::cuda {
namespace {

using model::ActivationCheckpointing;
using model::Precision;
using model::StateKind;

constexpr int64_t kBatch = 4, kSeq = 128;

// Three layers, so one block's gradient sits in another block's activations
// and the last one in the extra slot.
model::ModelConfig ThreeLayerConfig() {
  model::ModelConfig c;
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 2;  // head_dim 64
  c.num_key_value_heads = 1;
  c.intermediate_size = 384;
  c.max_context_width = kSeq;
  c.tie_word_embeddings = true;
  return c;
}

StatusOr<std::unique_ptr<CudaBackend>> Make(bool share, Precision p = Precision::kBF16,
                                            ActivationCheckpointing ck = ActivationCheckpointing::kNone) {
  model::BackendOptions o;
  o.precision = p;
  o.checkpointing = ck;
  o.micro_batch_size = kBatch;
  o.seq_len = kSeq;
  o.seed = 31;
  o.single_pass_grads = true;
  CudaOptions co;
  co.share_grads_with_activations = share;
  return CudaBackend::Create(ThreeLayerConfig(), o, co);
}

struct Batch {
  std::vector<int32_t> inputs, targets;
  model::TokenBatch view() const { return {inputs.data(), targets.data(), kBatch, kSeq, nullptr}; }
};

Batch RandomBatch(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, 511);
  Batch b;
  for (int64_t i = 0; i < kBatch * kSeq; ++i) {
    b.inputs.push_back(d(rng));
    b.targets.push_back(i % 11 == 3 ? -100 : d(rng));
  }
  return b;
}

std::vector<std::vector<float>> ReadAll(CudaBackend& b, StateKind kind) {
  std::vector<std::vector<float>> out;
  for (int u = 0; u < b.layout().num_units(); ++u) {
    std::vector<float> v(b.Owned(u).size());
    const Status st = b.ReadState(u, kind, v.data());
    EXPECT_TRUE(st.ok()) << st.ToString();
    out.push_back(std::move(v));
  }
  return out;
}

// ZeroGrads, one pass, global-norm clipping, AdamW: the trainer's step at A = 1.
struct StepResult {
  double loss = NAN;
  std::vector<std::vector<float>> grads;
};
StepResult Step(CudaBackend& b, const Batch& batch, int step) {
  model::NoOpUnitHooks hooks;
  StepResult r;
  EXPECT_TRUE(b.ZeroGrads().ok());
  auto loss = b.ForwardBackward(batch.view(), 1.0f, hooks);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  if (!loss.ok()) return r;
  r.loss = *loss;
  r.grads = ReadAll(b, StateKind::kShardGrads);
  auto sumsq = b.TotalGradSumSquares();
  EXPECT_TRUE(sumsq.ok()) << sumsq.status().ToString();
  kernels::AdamWParams p;
  p.lr = 2e-3f;
  p.weight_decay = 0.1f;
  p.step = step;
  p.grad_scale = static_cast<float>(std::min(1.0, 0.5 / (std::sqrt(*sumsq) + 1e-6)));
  for (int u = 0; u < b.layout().num_units(); ++u) EXPECT_TRUE(b.OptimizerStep(u, p).ok());
  return r;
}

TEST(SharedGrads, TrainsBitForBitLikeOwnBuffersWithLessMemory) {
  HT_SKIP_WITHOUT_GPU();
  for (Precision p : {Precision::kBF16, Precision::kFP32}) {
    SCOPED_TRACE(model::PrecisionName(p));
    auto shared = Make(true, p);
    auto own = Make(false, p);
    ASSERT_TRUE(shared.ok()) << shared.status().ToString();
    ASSERT_TRUE(own.ok()) << own.status().ToString();
    ASSERT_TRUE((*shared)->shares_grads_with_activations());
    ASSERT_FALSE((*own)->shares_grads_with_activations());
    // Two of the three block gradients need no buffer of their own.
    const int64_t block_grad = (*own)->layout().unit(1).padded_numel * 4;
    EXPECT_GE((*own)->allocated_bytes() - (*shared)->allocated_bytes(), 2 * block_grad - 4096);
    for (int step = 1; step <= 3; ++step) {
      const Batch batch = RandomBatch(100 + step);
      const StepResult a = Step(**shared, batch, step);
      const StepResult b = Step(**own, batch, step);
      EXPECT_EQ(a.loss, b.loss) << "step " << step;
      ASSERT_EQ(a.grads.size(), b.grads.size());
      for (size_t u = 0; u < a.grads.size(); ++u) {
        EXPECT_EQ(a.grads[u], b.grads[u]) << "step " << step << ", unit " << u;
        double sum = 0;
        for (float g : a.grads[u]) sum += std::fabs(g);
        EXPECT_GT(sum, 0.0) << "unit " << u << ": an all-zero gradient proves nothing";
      }
    }
    EXPECT_EQ(ReadAll(**shared, StateKind::kMasterParams), ReadAll(**own, StateKind::kMasterParams));
  }
}

TEST(SharedGrads, ZerosMaterialisedBeforeThePassChangeNothing) {
  HT_SKIP_WITHOUT_GPU();
  auto shared = Make(true);
  auto own = Make(false);
  ASSERT_TRUE(shared.ok() && own.ok());
  model::NoOpUnitHooks hooks;
  const Batch batch = RandomBatch(7);
  // A read after ZeroGrads makes the zeros real; the forward then overwrites
  // them in the shared plan, so the pass must still produce clean gradients.
  ASSERT_TRUE((*shared)->ZeroGrads().ok());
  for (const auto& g : ReadAll(**shared, StateKind::kShardGrads)) {
    for (float x : g) ASSERT_EQ(x, 0.0f);
  }
  ASSERT_TRUE((*shared)->ForwardBackward(batch.view(), 1.0f, hooks).ok());
  ASSERT_TRUE((*own)->ZeroGrads().ok());
  ASSERT_TRUE((*own)->ForwardBackward(batch.view(), 1.0f, hooks).ok());
  EXPECT_EQ(ReadAll(**shared, StateKind::kShardGrads), ReadAll(**own, StateKind::kShardGrads));
  // A forward-only Loss() after ZeroGrads is harmless too.
  ASSERT_TRUE((*shared)->ZeroGrads().ok());
  ASSERT_TRUE((*shared)->Loss(RandomBatch(8).view(), hooks).ok());
  ASSERT_TRUE((*shared)->ForwardBackward(batch.view(), 1.0f, hooks).ok());
  EXPECT_EQ(ReadAll(**shared, StateKind::kShardGrads), ReadAll(**own, StateKind::kShardGrads));
}

TEST(SharedGrads, RefusesAccumulationAndReadsAfterAnOverwrite) {
  HT_SKIP_WITHOUT_GPU();
  auto b = Make(true);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  model::NoOpUnitHooks hooks;
  const Batch batch = RandomBatch(9);
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  ASSERT_TRUE((*b)->ForwardBackward(batch.view(), 1.0f, hooks).ok());
  auto again = (*b)->ForwardBackward(batch.view(), 1.0f, hooks);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("without ZeroGrads"), std::string::npos)
      << again.status().ToString();
  // The refused pass ran nothing: the gradients are still readable.
  ASSERT_TRUE((*b)->TotalGradSumSquares().ok());
  ASSERT_TRUE((*b)->Loss(batch.view(), hooks).ok());
  EXPECT_EQ((*b)->TotalGradSumSquares().status().code(), StatusCode::kFailedPrecondition);
  std::vector<float> host((*b)->Owned(1).size());
  const Status read = (*b)->ReadState(1, StateKind::kShardGrads, host.data());
  EXPECT_EQ(read.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(read.message().find("overwritten"), std::string::npos) << read.ToString();
  kernels::AdamWParams p;
  p.step = 1;
  EXPECT_EQ((*b)->OptimizerStep(1, p).code(), StatusCode::kFailedPrecondition);
  // The master weights were not touched and ZeroGrads starts over.
  EXPECT_TRUE((*b)->ReadState(1, StateKind::kMasterParams, host.data()).ok());
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  EXPECT_TRUE((*b)->ForwardBackward(batch.view(), 1.0f, hooks).ok());
  EXPECT_TRUE((*b)->TotalGradSumSquares().ok());
}

TEST(SharedGrads, FullCheckpointingFallsBackToOwnBuffers) {
  HT_SKIP_WITHOUT_GPU();
  // full keeps only each block's input: too small for a block's gradient.
  auto full = Make(true, Precision::kBF16, ActivationCheckpointing::kFull);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_FALSE((*full)->shares_grads_with_activations());
  auto own = Make(false, Precision::kBF16, ActivationCheckpointing::kFull);
  ASSERT_TRUE(own.ok());
  const Batch batch = RandomBatch(11);
  const StepResult a = Step(**full, batch, 1);
  const StepResult b = Step(**own, batch, 1);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.grads, b.grads);
}

}  // namespace
}  // namespace hypertrain::cuda
