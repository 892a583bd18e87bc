// The CUDA backend's unit pool (runtime/model/backend.h) without NCCL: a
// pooled backend that owns the first half of every unit (shard rank 0 of 2)
// trains next to an unpooled reference on the same batches. The "other rank"
// is a twin that sees the same data: its shard of the params is the
// reference's, and a reduce-scatter (average over identical ranks) leaves
// the slot's owned range unchanged. So the pooled backend must produce the
// reference's loss, gradient shard (accumulated over 2 micro-batches through
// ReleaseGrads' fold) and updated master weights; the second step's loss also
// proves that OptimizerStep refreshed ComputeShard, which the "gather" reads.
// With the split embedding gradient (embedding_grad_ranks = 2) the twin
// "all-gathers" the lookup's tokens and output gradient (two identical
// copies) and the backend adds them into the owned rows of ShardGrads(E) —
// whose end cuts a row of embed_tokens — while the embedding's gradient slot
// is already released: same gradients and weights as the reference.
// GPU tests skip without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/backends/cuda/backend.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::cuda {
namespace {

model::ModelConfig SmallConfig() {
  model::ModelConfig c;
  c.vocab_size = 300;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;  // head_dim 64
  c.num_key_value_heads = 1;
  c.intermediate_size = 352;
  c.max_context_width = 64;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = true;
  return c;
}

model::BackendOptions Options() {
  model::BackendOptions o;
  o.precision = model::Precision::kBF16;
  o.micro_batch_size = 2;
  o.seq_len = 64;
  o.seed = 11;
  o.layout.pad_multiple = 2 * 64;  // as ShardedBackendOptions for 2 shards
  return o;
}

// Twin-rank hooks: acquire/release exactly like HSDP (reshard after forward);
// "gather" = own ComputeShard + the reference's other half; "reduce-scatter"
// of identical ranks = identity, then ReleaseGrads folds the owned range in.
class TwinHooks final : public model::UnitHooks {
 public:
  TwinHooks(CudaBackend& pooled, CudaBackend& ref, bool split)
      : p_(pooled), r_(ref), split_(split) {}
  bool SplitsEmbeddingGrad() const override { return split_; }
  // Split: the embedding slot now holds the head + final-norm gradient; the
  // "reduce-scatter" of identical ranks is the identity, so fold and free it.
  Status AfterHeadBackward() override { return split_ ? p_.ReleaseGrads(0) : Status::Ok(); }
  Status BeforeForward(int u) override {
    if (u == 0 && p_.ComputeParams(0).data != nullptr) HT_RETURN_IF_ERROR(p_.ReleaseParams(0));
    return Gather(u);
  }
  Status AfterForward(int u) override { return u == 0 ? Status::Ok() : p_.ReleaseParams(u); }
  Status BeforeBackward(int u) override {
    HT_RETURN_IF_ERROR(p_.AcquireGrads(u));
    return p_.ComputeParams(u).data != nullptr ? Status::Ok() : Gather(u);
  }
  Status AfterBackward(int u) override {
    if (split_ && u == 0) {
      if (p_.FullGrads(0).data != nullptr) return Internal("embedding gradient slot still held");
      HT_RETURN_IF_ERROR(GatherEmbeddingGrad());
      HT_RETURN_IF_ERROR(p_.AccumulateEmbeddingGrad(/*bf16_reduce=*/false));
    } else {
      HT_RETURN_IF_ERROR(p_.ReleaseGrads(u));
    }
    return p_.ReleaseParams(u);
  }

 private:
  Status Gather(int u) {
    HT_RETURN_IF_ERROR(p_.AcquireParams(u));
    const model::UnitBuffer full = p_.ComputeParams(u), own = p_.ComputeShard(u);
    const model::UnitBuffer other = r_.ComputeParams(u);
    const size_t es = model::DTypeSize(full.dtype), half = static_cast<size_t>(own.numel) * es;
    auto s = static_cast<cudaStream_t>(p_.ComputeStream());
    char* dst = static_cast<char*>(full.data);
    if (cudaMemcpyAsync(dst, own.data, half, cudaMemcpyDeviceToDevice, s) != cudaSuccess ||
        cudaMemcpyAsync(dst + half, static_cast<const char*>(other.data) + half, half,
                        cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
      return Internal("gather copy failed");
    }
    return Status::Ok();
  }
  // Both "ranks" saw the same tokens: two copies of this rank's inputs.
  Status GatherEmbeddingGrad() {
    const model::EmbeddingGradIo io = p_.EmbeddingGrad();
    if (io.ranks != 2 || io.tokens_per_rank != 2 * 64 || io.cols != 128 ||
        io.dtype != model::DType::kBF16) {
      return Internal("unexpected EmbeddingGrad buffers");
    }
    auto s = static_cast<cudaStream_t>(p_.ComputeStream());
    const size_t tb = io.tokens_per_rank * sizeof(int32_t);
    const size_t db = io.tokens_per_rank * io.cols * model::DTypeSize(io.dtype);
    for (int r = 0; r < io.ranks; ++r) {
      if (cudaMemcpyAsync(io.all_tokens + r * io.tokens_per_rank, io.tokens, tb,
                          cudaMemcpyDeviceToDevice, s) != cudaSuccess ||
          cudaMemcpyAsync(static_cast<char*>(io.all_dout) + r * db, io.dout, db,
                          cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
        return Internal("gather copy failed");
      }
    }
    return Status::Ok();
  }
  CudaBackend& p_;
  CudaBackend& r_;
  bool split_;
};

std::vector<float> Read(model::Backend& b, int u, model::StateKind k) {
  std::vector<float> v(b.Owned(u).size());
  const Status st = b.ReadState(u, k, v.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return v;
}

void RunTwin(bool split) {
  const model::ModelConfig cfg = SmallConfig();
  model::BackendOptions ro = Options();
  auto ref = CudaBackend::Create(cfg, ro);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  model::BackendOptions po = Options();
  const model::ParamLayout& layout = (*ref)->layout();
  for (int u = 0; u < layout.num_units(); ++u) po.owned.push_back({0, layout.unit(u).padded_numel / 2});
  po.unit_pool = true;
  po.pool_param_slots = 1;  // enough without prefetch
  po.embedding_grad_ranks = split ? 2 : 0;
  auto pooled = CudaBackend::Create(cfg, po);
  ASSERT_TRUE(pooled.ok()) << pooled.status().ToString();
  CudaBackend& P = **pooled;
  CudaBackend& R = **ref;
  ASSERT_TRUE(P.PoolsUnits());
  EXPECT_EQ(P.SplitsEmbeddingGrad(), split);
  // The owned half of the embedding unit ends mid-row of embed_tokens.
  ASSERT_NE(po.owned[0].end % cfg.hidden_size, 0);
  EXPECT_FALSE(R.PoolsUnits());
  EXPECT_GT(P.pool_bytes(), 0);
  EXPECT_LT(P.state_bytes() + P.pool_bytes(), R.state_bytes());
  EXPECT_EQ(P.ComputeParams(1).data, nullptr);
  EXPECT_EQ(P.FullGrads(1).data, nullptr);

  // Without hooks that acquire, a pooled backend refuses instead of faulting.
  std::mt19937 rng(3);
  auto batch = [&](std::vector<int32_t>& in, std::vector<int32_t>& tg) {
    in.resize(2 * 64), tg.resize(2 * 64);
    for (size_t i = 0; i < in.size(); ++i) in[i] = rng() % 300, tg[i] = rng() % 300;
    return model::TokenBatch{in.data(), tg.data(), 2, 64, nullptr};
  };
  std::vector<int32_t> in0, tg0;
  model::NoOpUnitHooks noop;
  auto refused = P.ForwardBackward(batch(in0, tg0), 1.0f, noop);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  // One block param slot: a second block cannot be acquired while one is held.
  ASSERT_TRUE(P.AcquireParams(1).ok());
  EXPECT_FALSE(P.AcquireParams(2).ok());
  ASSERT_TRUE(P.ReleaseParams(1).ok());

  TwinHooks twin(P, R, split);
  kernels::AdamWParams ap;
  ap.lr = 1e-3f;
  ap.weight_decay = 0.1f;
  for (int step = 1; step <= 2; ++step) {
    std::vector<int32_t> in[2], tg[2];
    const model::TokenBatch b0 = batch(in[0], tg[0]), b1 = batch(in[1], tg[1]);
    ASSERT_TRUE(P.ZeroGrads().ok());
    auto p0 = P.ForwardBackward(b0, 0.5f, twin);
    ASSERT_TRUE(p0.ok()) << p0.status().ToString();
    auto p1 = P.ForwardBackward(b1, 0.5f, twin);
    ASSERT_TRUE(p1.ok()) << p1.status().ToString();
    ASSERT_TRUE(R.ZeroGrads().ok());
    auto r0 = R.ForwardBackward(b0, 0.5f, noop);
    auto r1 = R.ForwardBackward(b1, 0.5f, noop);
    ASSERT_TRUE(r0.ok() && r1.ok());
    // Step 1: identical params. Step 2: the masters differ by fp32 summation
    // order, so a few bf16 compute weights may differ by one ulp.
    const double loss_rel = step == 1 ? 1e-6 : 1e-4, grad_rel = step == 1 ? 1e-5 : 1e-3;
    EXPECT_NEAR(*p0, *r0, loss_rel * *r0) << "step " << step;
    EXPECT_NEAR(*p1, *r1, loss_rel * *r1) << "step " << step;
    for (int u = 0; u < layout.num_units(); ++u) {
      EXPECT_EQ(P.ComputeParams(u).data, nullptr) << "unit " << u;  // all released
      EXPECT_EQ(P.FullGrads(u).data, nullptr) << "unit " << u;
      const std::vector<float> pg = Read(P, u, model::StateKind::kShardGrads);
      const std::vector<float> rg = Read(R, u, model::StateKind::kShardGrads);
      double max_rel = 0, scale = 0;
      for (size_t i = 0; i < pg.size(); ++i) scale = std::max(scale, static_cast<double>(std::fabs(rg[i])));
      for (size_t i = 0; i < pg.size(); ++i) {
        ASSERT_TRUE(std::isfinite(pg[i])) << "unit " << u << " elem " << i;
        max_rel = std::max(max_rel, std::fabs(pg[i] - rg[i]) / scale);
      }
      EXPECT_GT(scale, 0) << "unit " << u;
      EXPECT_LE(max_rel, grad_rel) << "unit " << u << " step " << step;
    }
    ap.step = step;
    for (int u = 0; u < layout.num_units(); ++u) {
      ASSERT_TRUE(P.OptimizerStep(u, ap).ok());
      ASSERT_TRUE(R.OptimizerStep(u, ap).ok());
    }
    ASSERT_TRUE(P.Synchronize().ok());
    ASSERT_TRUE(R.Synchronize().ok());
    for (int u = 0; u < layout.num_units(); ++u) {
      const std::vector<float> pm = Read(P, u, model::StateKind::kMasterParams);
      const std::vector<float> rm = Read(R, u, model::StateKind::kMasterParams);
      double max_diff = 0;
      for (size_t i = 0; i < pm.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(pm[i] - rm[i])));
      EXPECT_LE(max_diff, 0.05 * ap.lr) << "unit " << u << " step " << step;
    }
  }
}

TEST(CudaUnitPool, MatchesUnpooledBackendWithAccumulation) {
  HT_SKIP_WITHOUT_GPU();
  RunTwin(/*split=*/false);
}

TEST(CudaUnitPool, SplitEmbeddingGradMatchesUnpooledBackend) {
  HT_SKIP_WITHOUT_GPU();
  RunTwin(/*split=*/true);
}

TEST(CudaUnitPoolArgs, RejectsPoolWithoutShards) {
  HT_SKIP_WITHOUT_GPU();
  model::BackendOptions o = Options();
  o.unit_pool = true;  // no owned ranges: nothing to pool against
  auto r = CudaBackend::Create(SmallConfig(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
}

}  // namespace
}  // namespace hypertrain::cuda
