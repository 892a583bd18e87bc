// HSDP parity on CPU with Gloo: 2 "nodes" x 2 ranks (4 real processes on
// 127.0.0.1) for every sharding strategy train the tiny model for a few steps
// and must match a single process that trains on the same global batch:
//   fp32 reduce: losses within 2e-5 relative, grad norms within 1e-4
//                relative, every parameter within 5% of lr absolute and the
//                mean |difference| below 1e-7 (summation order differs; AdamW's
//                m/sqrt(v) turns relative gradient rounding on near-zero
//                gradients into update differences of a few % of lr);
//   bf16 reduce: losses within 2e-3 relative, parameters within
//                2 x lr x steps absolute (AdamW normalises updates to ~lr, so
//                a gradient rounded across zero can at worst reverse one
//                update per step), mean |difference| below 1e-4.
#include "runtime/parallel/hsdp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "runtime/backends/cpu/backend.h"
#include "runtime/parallel/multiprocess_testing.h"

namespace hypertrain::parallel {
namespace {

constexpr int kWorld = 4, kLocal = 2;
constexpr int kSteps = 3;
constexpr int64_t kSeq = 16, kGlobalBatch = 8, kMicro = 1;  // 2 micro-batches per rank
constexpr float kLr = 2e-3f, kMaxNorm = 0.5f;

model::ModelConfig Config(bool tied = true) {
  model::ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 2;
  c.max_context_width = kSeq;
  c.tie_word_embeddings = tied;
  return c;
}

// Global batch of a step: kGlobalBatch sequences.
struct Batch {
  std::vector<int32_t> in, tg;
};
Batch GlobalBatch(int step, int64_t vocab) {
  std::mt19937_64 rng(1000 + step);
  Batch b;
  for (int64_t i = 0; i < kGlobalBatch * kSeq; ++i) {
    // Every 4th input is the same id: repeated within and across ranks (the
    // split embedding gradient sums one row from every rank's tokens).
    b.in.push_back(i % 4 == 0 ? 129 : static_cast<int32_t>(rng() % vocab));
    b.tg.push_back(static_cast<int32_t>(rng() % vocab));
  }
  return b;
}

struct Result {
  std::vector<double> losses, norms;
  // Loss on the first global batch after every master param was halved
  // through WriteState between steps (a "restore"): a gather prefetched
  // before the write must not be used.
  double restored_loss = 0;
  std::vector<model::Range> owned;
  std::vector<std::vector<float>> params;  // owned master params per unit
};

// One optimizer step in the order of runtime/model/backend.h. `first_seq` and
// `num_seq`: the slice of the global batch this rank reads.
Status Step(model::Backend& b, model::UnitHooks& hooks, const Batch& g, int64_t first_seq,
            int64_t num_seq, int64_t micro, int step, double* loss, double* norm) {
  if (hooks.OverwritesShardGrads()) {
    // As the trainer: no ZeroGrads. Poison the shards instead, so a unit
    // whose first reduce-scatter did not overwrite its shard shows up.
    for (int u = 0; u < b.layout().num_units(); ++u) {
      const model::UnitBuffer sg = b.ShardGrads(u);
      std::fill_n(static_cast<float*>(sg.data), sg.numel, std::nanf(""));
    }
  } else {
    HT_RETURN_IF_ERROR(b.ZeroGrads());
  }
  const int64_t M = num_seq / micro;
  double sum = 0;
  for (int64_t m = 0; m < M; ++m) {
    HT_RETURN_IF_ERROR(hooks.BeginMicroBatch(static_cast<int>(m), m + 1 == M));
    const int64_t off = (first_seq + m * micro) * kSeq;
    model::TokenBatch tb{g.in.data() + off, g.tg.data() + off, micro, kSeq};
    HT_ASSIGN_OR_RETURN(double l, b.ForwardBackward(tb, 1.0f / M, hooks));
    sum += l / M;
  }
  HT_RETURN_IF_ERROR(hooks.FinishGradients());
  double sq = 0;
  for (int u = 0; u < b.layout().num_units(); ++u) {
    HT_ASSIGN_OR_RETURN(double s, b.GradSumSquares(u));
    sq += s;
  }
  HT_ASSIGN_OR_RETURN(sq, hooks.GlobalSumSquares(sq));
  *norm = std::sqrt(sq);
  const float clip = *norm > kMaxNorm ? static_cast<float>(kMaxNorm / *norm) : 1.0f;
  for (int u = 0; u < b.layout().num_units(); ++u) {
    kernels::AdamWParams p;
    p.lr = kLr;
    p.step = step;
    p.weight_decay = 0.1f;
    p.grad_scale = clip;
    HT_RETURN_IF_ERROR(b.OptimizerStep(u, p));
    HT_RETURN_IF_ERROR(hooks.AfterOptimizerStep(u));  // HSDP: next pass's gathers start here
  }
  HT_ASSIGN_OR_RETURN(*loss, hooks.MeanAcrossDataParallel(sum));
  return Status::Ok();
}

void Save(const std::string& path, const Result& r) {
  std::ofstream f(path, std::ios::binary);
  auto put = [&](const void* p, size_t n) { f.write(static_cast<const char*>(p), n); };
  put(r.losses.data(), sizeof(double) * kSteps);
  put(r.norms.data(), sizeof(double) * kSteps);
  put(&r.restored_loss, sizeof(double));
  const int64_t U = r.owned.size();
  put(&U, 8);
  for (int64_t u = 0; u < U; ++u) {
    put(&r.owned[u], sizeof(model::Range));
    put(r.params[u].data(), sizeof(float) * r.params[u].size());
  }
}

bool Load(const std::string& path, Result* r) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  r->losses.resize(kSteps);
  r->norms.resize(kSteps);
  f.read(reinterpret_cast<char*>(r->losses.data()), sizeof(double) * kSteps);
  f.read(reinterpret_cast<char*>(r->norms.data()), sizeof(double) * kSteps);
  f.read(reinterpret_cast<char*>(&r->restored_loss), sizeof(double));
  int64_t U = 0;
  f.read(reinterpret_cast<char*>(&U), 8);
  r->owned.resize(U);
  r->params.resize(U);
  for (int64_t u = 0; u < U; ++u) {
    f.read(reinterpret_cast<char*>(&r->owned[u]), sizeof(model::Range));
    r->params[u].resize(r->owned[u].size());
    f.read(reinterpret_cast<char*>(r->params[u].data()), sizeof(float) * r->params[u].size());
  }
  return static_cast<bool>(f);
}

Result Collect(model::Backend& b) {
  Result r;
  for (int u = 0; u < b.layout().num_units(); ++u) {
    const auto mp = b.MasterParams(u);
    r.owned.push_back(b.Owned(u));
    const float* p = static_cast<const float*>(mp.data);
    r.params.emplace_back(p, p + mp.numel);
  }
  return r;
}

// Halves every owned master param through WriteState (as a checkpoint
// restore would write new values between steps).
Status HalveParams(model::Backend& b) {
  for (int u = 0; u < b.layout().num_units(); ++u) {
    std::vector<float> x(b.Owned(u).size());
    HT_RETURN_IF_ERROR(b.ReadState(u, model::StateKind::kMasterParams, x.data()));
    for (float& v : x) v *= 0.5f;
    HT_RETURN_IF_ERROR(b.WriteState(u, model::StateKind::kMasterParams, x.data()));
  }
  return Status::Ok();
}

int Fail(int rank, const Status& s) {
  std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
  return 1;
}

int Reference(const std::string& path, bool tied) {
  const auto cfg = Config(tied);
  model::BackendOptions o;
  o.micro_batch_size = kGlobalBatch;
  o.seq_len = kSeq;
  auto b = cpu::CpuBackend::Create(cfg, o);
  if (!b.ok()) return Fail(-1, b.status());
  model::NoOpUnitHooks hooks;
  Result r;
  for (int s = 1; s <= kSteps; ++s) {
    double loss, norm;
    Status st = Step(**b, hooks, GlobalBatch(s, cfg.vocab_size), 0, kGlobalBatch, kGlobalBatch, s, &loss, &norm);
    if (!st.ok()) return Fail(-1, st);
    r.losses.push_back(loss);
    r.norms.push_back(norm);
  }
  Result p = Collect(**b);
  p.losses = r.losses;
  p.norms = r.norms;
  if (Status st = HalveParams(**b); !st.ok()) return Fail(-1, st);
  const Batch g = GlobalBatch(1, cfg.vocab_size);
  auto l = (*b)->Loss(model::TokenBatch{g.in.data(), g.tg.data(), kGlobalBatch, kSeq}, hooks);
  if (!l.ok()) return Fail(-1, l.status());
  p.restored_loss = *l;
  Save(path, p);
  return 0;
}

struct Case {
  ShardingStrategy strategy;
  DType reduce;
  bool pool = true;  // ShardedBackendOptions' default: pooled full-size buffers
  bool tied = true;
  bool split = true;  // HsdpOptions::split_embedding_grad
  bool overlap_replica = true;  // HsdpOptions::replica_reduce_during_backward
};

int Rank(int rank, int port, const Case& c, const std::string& dir) {
  const ShardingStrategy strategy = c.strategy;
  auto ctx = testing::LocalGlooContext(rank, kWorld, kLocal, port, "hsdp-test", strategy);
  if (!ctx.ok()) return Fail(rank, ctx.status());
  // A peer's closed socket must surface as a collective error, not SIGPIPE.
  struct sigaction pipe_action {};
  if (sigaction(SIGPIPE, nullptr, &pipe_action) != 0 || pipe_action.sa_handler != SIG_IGN) {
    return Fail(rank, Internal("DistContext did not ignore SIGPIPE"));
  }
  const auto cfg = Config(c.tied);
  model::BackendOptions base;
  base.micro_batch_size = kMicro;
  base.seq_len = kSeq;
  auto bo = ShardedBackendOptions(cfg, base, (*ctx)->layout());
  if (!bo.ok()) return Fail(rank, bo.status());
  if (!c.pool) bo->unit_pool = false;
  auto b = cpu::CpuBackend::Create(cfg, *bo);
  if (!b.ok()) return Fail(rank, b.status());
  HsdpOptions ho;
  ho.reduce_dtype = c.reduce;
  ho.split_embedding_grad = c.split;
  ho.replica_reduce_during_backward = c.overlap_replica;
  auto hooks = HsdpHooks::Create(**ctx, **b, ho);
  if (!hooks.ok()) return Fail(rank, hooks.status());
  Result r;
  const int64_t per_rank = kGlobalBatch / kWorld;
  const int dp = (*ctx)->layout().dp_rank();
  for (int s = 1; s <= kSteps; ++s) {
    (*ctx)->watchdog().SetStep(s);
    double loss, norm;
    Status st = Step(**b, **hooks, GlobalBatch(s, cfg.vocab_size), dp * per_rank, per_rank, kMicro, s,
                     &loss, &norm);
    if (!st.ok()) return Fail(rank, st);
    r.losses.push_back(loss);
    r.norms.push_back(norm);
  }
  Result p = Collect(**b);
  p.losses = r.losses;
  p.norms = r.norms;
  // Between steps a pooling backend holds no full-size block params or grads
  // but block 0's params, gathered for the next pass during the optimizer.
  int held = 0;
  for (int u = 1; u < cfg.num_hidden_layers + 1; ++u) {
    held += u > 1 && (*b)->ComputeParams(u).data != nullptr;
    held += (*b)->FullGrads(u).data != nullptr;
  }
  const bool block0_held = (*b)->ComputeParams(1).data != nullptr;
  // A "restore" between steps: the gathers started after the last optimizer
  // step now hold stale params; the next pass must gather again. Each rank's
  // loss on its slice of global batch 1, averaged, is the reference's loss on
  // the whole batch (equal target counts).
  if (Status st = (*hooks)->WaitForPrefetches(); !st.ok()) return Fail(rank, st);
  if (Status st = HalveParams(**b); !st.ok()) return Fail(rank, st);
  {
    const Batch g = GlobalBatch(1, cfg.vocab_size);
    double local = 0;
    for (int64_t m = 0; m < per_rank / kMicro; ++m) {  // forward-only passes of kMicro sequences
      const int64_t off = (dp * per_rank + m * kMicro) * kSeq;
      const model::TokenBatch tb{g.in.data() + off, g.tg.data() + off, kMicro, kSeq};
      auto l = (*b)->Loss(tb, **hooks);
      if (!l.ok()) return Fail(rank, l.status());
      local += *l / (per_rank / kMicro);
    }
    auto mean = (*hooks)->MeanAcrossDataParallel(local);
    if (!mean.ok()) return Fail(rank, mean.status());
    p.restored_loss = *mean;
  }
  Save(dir + "/rank" + std::to_string(rank), p);
  const HsdpStats& hs = (*hooks)->stats();
  std::ofstream(dir + "/stats" + std::to_string(rank))
      << hs.all_gathers << " " << hs.prefetch_hits << " " << hs.reduce_scatters << " "
      << hs.all_reduces << " " << ((*b)->PoolsUnits() ? 1 : 0) << " " << held << " "
      << hs.early_all_reduces << " " << hs.early_gathers << " " << hs.stale_gathers << " "
      << hs.direct_reduce_scatters << " " << (block0_held ? 1 : 0) << " "
      << ((*hooks)->SplitsEmbeddingGrad() ? 1 : 0) << " " << hs.embedding_grad_gathers << " "
      << hs.embedding_grad_gather_bytes;
  return 0;
}

class HsdpParity : public ::testing::TestWithParam<Case> {};

TEST_P(HsdpParity, MatchesSingleProcess) {
  const Case c = GetParam();
  std::string tmpl = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/hsdpXXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  ASSERT_EQ(testing::RunProcesses(1, [&](int) { return Reference(dir + "/ref", c.tied); })[0], 0);
  const int port = testing::PickFreePort();
  const auto codes = testing::RunProcesses(
      kWorld, [&](int r) { return Rank(r, port, c, dir); }, std::chrono::seconds(120));
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(codes[r], 0) << "rank " << r;

  Result ref;
  ASSERT_TRUE(Load(dir + "/ref", &ref));
  const bool bf16 = c.reduce == DType::kBF16;
  const double loss_rel = bf16 ? 2e-3 : 2e-5, norm_rel = bf16 ? 2e-2 : 1e-4;
  const double param_abs = bf16 ? 2 * kLr * kSteps : 0.05 * kLr, mean_abs = bf16 ? 1e-4 : 1e-7;
  const auto layout = *model::ParamLayout::Build(Config(c.tied));
  // Rows of embed_tokens cut by some rank's owned range (the split embedding
  // gradient's range ends fall mid-row), counted over the ranks.
  int cut_rows = 0;
  for (int r = 0; r < kWorld; ++r) {
    Result got;
    ASSERT_TRUE(Load(dir + "/rank" + std::to_string(r), &got));
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(got.losses[s], ref.losses[s], loss_rel * ref.losses[s]) << "rank " << r << " step " << s + 1;
      EXPECT_NEAR(got.norms[s], ref.norms[s], norm_rel * ref.norms[s]) << "rank " << r << " step " << s + 1;
    }
    EXPECT_GT(ref.norms[0], kMaxNorm);  // clipping was active, so the norm mattered
    double max_diff = 0, sum_diff = 0;
    int64_t compared = 0;
    {
      const model::Range own = got.owned[0];
      const model::TensorSlot& t = layout.unit(0).tensors[model::kEmbedTokens];
      const int64_t C = Config().hidden_size;
      for (int64_t e : {own.begin, own.end})
        cut_rows += e > t.offset && e < t.offset + t.numel && (e - t.offset) % C != 0;
    }
    for (size_t u = 0; u < got.owned.size(); ++u) {
      const model::Range own = got.owned[u];
      const int64_t n = layout.unit(u).numel;
      for (int64_t i = own.begin; i < own.end; ++i) {
        const float want = i < n ? ref.params[u][i] : 0.0f;  // shard padding stays zero
        const float have = got.params[u][i - own.begin];
        ASSERT_TRUE(std::isfinite(have)) << "unit " << u << " elem " << i;
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(have - want)));
        sum_diff += std::fabs(have - want);
        ++compared;
      }
    }
    EXPECT_LE(max_diff, param_abs) << "rank " << r;
    // After the WriteState "restore": the halved params were used, not the
    // stale gather prefetched during the last optimizer step.
    EXPECT_NEAR(got.restored_loss, ref.restored_loss, loss_rel * ref.restored_loss) << "rank " << r;
    ASSERT_GT(compared, 0);
    EXPECT_LE(sum_diff / compared, mean_abs) << "rank " << r;
    if (bf16) {
      EXPECT_GT(max_diff, 1e-4) << "bf16 reduction left no trace: was it used?";
    }
    std::printf("%s reduce %s rank %d: %lld params, max |diff| %.3g, mean %.3g, losses %.6f %.6f %.6f (ref %.6f %.6f %.6f)\n",
                ShardingStrategyName(c.strategy), DTypeName(c.reduce), r, static_cast<long long>(compared),
                max_diff, sum_diff / compared, got.losses[0], got.losses[1], got.losses[2], ref.losses[0], ref.losses[1], ref.losses[2]);
  }
  // Communication pattern: gathers per micro-batch are 1 + L (zero2) or 1 + 2L.
  std::ifstream st(dir + "/stats0");
  int64_t gathers, hits, rs, ar, pooled, held, early, early_gathers, stale, direct, block0_held,
      split, emb_gathers, emb_bytes;
  st >> gathers >> hits >> rs >> ar >> pooled >> held >> early >> early_gathers >> stale >>
      direct >> block0_held >> split >> emb_gathers >> emb_bytes;
  ASSERT_TRUE(static_cast<bool>(st));
  const auto g = *ComputeGroupLayout(c.strategy, 0, kWorld, kLocal, 0);
  const int64_t L = Config().num_hidden_layers, micro = kSteps * (kGlobalBatch / kWorld / kMicro);
  // The split embedding gradient runs exactly where asked and possible.
  const bool want_split = c.split && c.pool && g.shard_degree > 1;
  EXPECT_EQ(split, want_split ? 1 : 0);
  EXPECT_EQ(emb_gathers, want_split ? micro : 0);
  // Per micro-batch: every shard rank's kMicro x kSeq token ids (4 bytes)
  // and fp32 embedding-output gradients.
  EXPECT_EQ(emb_bytes, want_split
                           ? micro * g.shard_degree * kMicro * kSeq * (4 + 4 * Config().hidden_size)
                           : 0);
  // Tiny's embed_tokens is 256 rows of 128: shards of the tied unit (D = 2,
  // 4) and of the untied one with D = 4 end mid-row; the untied unit with
  // D = 2 puts all of embed_tokens in rank 0's shard (rank 1: none).
  if (want_split && (c.tied || g.shard_degree > 2)) {
    EXPECT_GT(cut_rows, 0) << "no owned range starts or ends mid-row: the row cut is untested";
  }
  if (g.shard_degree == 1) {
    EXPECT_EQ(gathers, 0);
    EXPECT_EQ(rs, 0);
  } else {
    // Per micro-batch 1 + 2L (reshard) or 1 + L (zero2); after the restore
    // each of the 2 forward-only passes gathers 1 + L (the first re-gathers
    // the stale embedding and block 0), and the two stale prefetches count.
    const int64_t eval_passes = kGlobalBatch / kWorld / kMicro;
    EXPECT_EQ(gathers,
              micro * (1 + (g.reshard_after_forward ? 2 * L : L)) + 2 + eval_passes * (1 + L));
    // Embedding + block 0 gathered after each step's optimizer; the ones of
    // steps 1..kSteps-1 used by the next pass, the last step's stale after
    // the restore.
    EXPECT_EQ(early_gathers, 2 * kSteps);
    EXPECT_EQ(stale, 2);
    EXPECT_EQ(pooled, c.pool ? 1 : 0);
    if (c.pool) {
      // Pooled grads: reduce-scattered every micro-batch, folded into ShardGrads
      // (the first micro-batch of each step straight into it).
      EXPECT_EQ(rs, micro * (1 + L));
      EXPECT_EQ(direct, kSteps * (1 + L));
      if (g.reshard_after_forward) {
        EXPECT_EQ(held, 0);
      }
      EXPECT_EQ(block0_held, 1);
    } else {
      EXPECT_EQ(direct, 0);
      EXPECT_EQ(rs, kSteps * (1 + L));  // accumulated in full grads, last micro-batch only
    }
    EXPECT_GT(hits, 0);  // prefetch issued ahead of use
  }
  EXPECT_EQ(ar, g.replica_degree > 1 ? kSteps * (1 + L) : 0);  // once per step, not per micro-batch
  // Started during the last micro-batch's backward (overlapped): every unit
  // with no_shard or the split embedding gradient (the embedding's after its
  // lookup gradient was added), the blocks with a pool (the embedding's
  // reduce-scatter is the last one, waited for in FinishGradients), none
  // unpooled.
  const int64_t want_early = g.replica_degree == 1 || !c.overlap_replica ? 0
                             : g.shard_degree == 1 || want_split ? kSteps * (1 + L)
                             : c.pool                            ? kSteps * L
                                                                 : 0;
  EXPECT_EQ(early, want_early);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, HsdpParity,
    ::testing::Values(Case{ShardingStrategy::kHybridShard, DType::kF32},
                      Case{ShardingStrategy::kHybridShardZero2, DType::kF32},
                      Case{ShardingStrategy::kFullShard, DType::kF32},
                      Case{ShardingStrategy::kShardGradOp, DType::kF32},
                      Case{ShardingStrategy::kNoShard, DType::kF32},
                      Case{ShardingStrategy::kHybridShard, DType::kBF16},
                      Case{ShardingStrategy::kHybridShard, DType::kF32, /*pool=*/false},
                      // The embedding unit's gradient reduce-scattered whole
                      // (split off), and untied embeddings (a separate LM
                      // head in the unit; with 4 shards two ranks own none
                      // of embed_tokens).
                      Case{ShardingStrategy::kHybridShard, DType::kF32, true, true,
                           /*split=*/false},
                      Case{ShardingStrategy::kHybridShard, DType::kF32, true, /*tied=*/false},
                      Case{ShardingStrategy::kFullShard, DType::kF32, true, /*tied=*/false},
                      Case{ShardingStrategy::kHybridShard, DType::kBF16, true, /*tied=*/false},
                      // Replica all-reduces after the backward, not during it.
                      Case{ShardingStrategy::kHybridShard, DType::kF32, true, true, true,
                           /*overlap_replica=*/false}),
    [](const auto& info) {
      return std::string(ShardingStrategyName(info.param.strategy)) + "_" +
             DTypeName(info.param.reduce) + (info.param.pool ? "" : "_nopool") +
             (info.param.tied ? "" : "_untied") + (info.param.split ? "" : "_whole_embedding") +
             (info.param.overlap_replica ? "" : "_replica_after");
    });

}  // namespace
}  // namespace hypertrain::parallel
