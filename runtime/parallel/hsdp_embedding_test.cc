// The embedding gradient path where the split one would not fit (issue 34):
// with shard degree x tokens per rank above the vocabulary's rows,
// ShardedBackendOptions plans no gather buffers (contract::SplitsEmbeddingGrad)
// and the embedding unit is reduce-scattered whole like every other unit. Real
// processes on 127.0.0.1 (Gloo) train the tiny model both ways — the old split
// path forced on (gather buffers for every shard rank) and the new default —
// and each rank compares its gradient shards and parameters:
//  - 2 ranks, untied embeddings: bit for bit. The table's rows hold only the
//    lookup's gradient, each rank's rows summed in fp32 in token order either
//    way, and two partial sums add the same in either order;
//  - 4 ranks, tied embeddings: within 8 fp32 epsilons of the unit's largest
//    gradient. Gloo's halving-doubling reduce-scatter adds the 4 ranks' parts
//    pairwise where the split path adds them in rank order, and the tied
//    table's head and lookup parts are summed before the reduction instead of
//    after it: a reassociation of at most 8 terms.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/backends/cpu/backend.h"
#include "runtime/parallel/hsdp.h"
#include "runtime/parallel/multiprocess_testing.h"

namespace hypertrain::parallel {
namespace {

constexpr int64_t kSeq = 64, kMicro = 3, kMicroBatches = 2;  // 192 tokens per pass
constexpr int kSteps = 2;

model::ModelConfig Config(bool tied) {
  model::ModelConfig c = *model::NamedModelConfig("tiny");  // 256 vocabulary rows
  c.num_hidden_layers = 2;
  c.max_context_width = kSeq;
  c.tie_word_embeddings = tied;
  return c;
}

// What one way of training left on this rank: each step's gradient shards
// (before the optimizer) and the owned master params after the last step.
struct Trace {
  std::vector<std::vector<float>> grads, params;
  std::vector<double> losses;
  bool split = false;
  int64_t emb_gathers = 0;
};

std::vector<int32_t> Tokens(int rank, int step, int micro, int64_t vocab) {
  std::mt19937_64 rng(7919 * step + 131 * micro + rank);
  std::vector<int32_t> t(kMicro * kSeq);
  // Every 4th token the same id: one row summed from every rank.
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 4 == 0 ? 129 : static_cast<int32_t>(rng() % vocab);
  return t;
}

StatusOr<Trace> Train(DistContext& ctx, const model::ModelConfig& cfg, const model::BackendOptions& bo) {
  HT_ASSIGN_OR_RETURN(auto b, cpu::CpuBackend::Create(cfg, bo));
  HT_ASSIGN_OR_RETURN(auto hooks, HsdpHooks::Create(ctx, *b, HsdpOptions{}));
  Trace t;
  t.split = hooks->SplitsEmbeddingGrad();
  const int U = b->layout().num_units();
  for (int s = 1; s <= kSteps; ++s) {
    double loss = 0;
    for (int m = 0; m < kMicroBatches; ++m) {
      HT_RETURN_IF_ERROR(hooks->BeginMicroBatch(m, m + 1 == kMicroBatches));
      const auto in = Tokens(ctx.rank(), s, m, cfg.vocab_size);
      const auto tg = Tokens(ctx.rank(), s, m + 100, cfg.vocab_size);
      HT_ASSIGN_OR_RETURN(double l, b->ForwardBackward(model::TokenBatch{in.data(), tg.data(), kMicro, kSeq},
                                                       1.0f / kMicroBatches, *hooks));
      loss += l / kMicroBatches;
    }
    HT_RETURN_IF_ERROR(hooks->FinishGradients());
    t.losses.push_back(loss);
    for (int u = 0; u < U; ++u) {
      const model::UnitBuffer g = b->ShardGrads(u);
      const float* p = static_cast<const float*>(g.data);
      t.grads.emplace_back(p, p + g.numel);
      kernels::AdamWParams ap;
      ap.lr = 1e-3f;
      ap.step = s;
      HT_RETURN_IF_ERROR(b->OptimizerStep(u, ap));
      HT_RETURN_IF_ERROR(hooks->AfterOptimizerStep(u));
    }
  }
  HT_RETURN_IF_ERROR(hooks->WaitForPrefetches());
  for (int u = 0; u < U; ++u) {
    const model::UnitBuffer mp = b->MasterParams(u);
    const float* p = static_cast<const float*>(mp.data);
    t.params.emplace_back(p, p + mp.numel);
  }
  t.emb_gathers = hooks->stats().embedding_grad_gathers;
  return t;
}

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

// Largest |a - b| over the vectors, and the largest |a|.
void Diff(const std::vector<float>& a, const std::vector<float>& b, double* diff, double* scale) {
  *diff = 0;
  *scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    *diff = std::max(*diff, static_cast<double>(std::fabs(a[i] - b[i])));
    *scale = std::max(*scale, static_cast<double>(std::fabs(a[i])));
  }
}

int Rank(int rank, int world, int port, bool tied) {
  auto ctx = testing::LocalGlooContext(rank, world, /*per_node=*/2, port, "hsdp-emb-test",
                                       ShardingStrategy::kFullShard);
  if (!ctx.ok()) return Fail(rank, ctx.status().ToString());
  const auto cfg = Config(tied);
  model::BackendOptions base;
  base.micro_batch_size = kMicro;
  base.seq_len = kSeq;
  auto bo = ShardedBackendOptions(cfg, base, (*ctx)->layout());
  if (!bo.ok()) return Fail(rank, bo.status().ToString());
  // world x 192 token rows > 256 vocabulary rows: no gather planned.
  if (bo->embedding_grad_ranks != 0) {
    return Fail(rank, "ShardedBackendOptions planned the split gather for " +
                          std::to_string(world * kMicro * kSeq) + " token rows");
  }
  model::BackendOptions old_bo = *bo;
  old_bo.embedding_grad_ranks = world;  // the old path: gather every shard rank's rows
  auto old_t = Train(**ctx, cfg, old_bo);
  if (!old_t.ok()) return Fail(rank, "split path: " + old_t.status().ToString());
  auto new_t = Train(**ctx, cfg, *bo);
  if (!new_t.ok()) return Fail(rank, "reduce-scatter path: " + new_t.status().ToString());
  if (!old_t->split || old_t->emb_gathers != kSteps * kMicroBatches) {
    return Fail(rank, "the forced split path did not run");
  }
  if (new_t->split || new_t->emb_gathers != 0) return Fail(rank, "the new path still gathers");
  int bad = 0;
  auto compare = [&](const char* what, const std::vector<std::vector<float>>& a,
                     const std::vector<std::vector<float>>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      double diff, scale;
      Diff(a[i], b[i], &diff, &scale);
      const bool exact = std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) == 0;
      const bool ok = tied ? diff <= 8 * FLT_EPSILON * scale : exact;
      std::printf("rank %d %s %zu: %zu values, max |diff| %.3g (max |value| %.3g)%s\n", rank, what, i,
                  a[i].size(), diff, scale, exact ? ", bit for bit" : "");
      bad += !ok;
    }
  };
  compare("gradient shard (step x units + unit)", old_t->grads, new_t->grads);
  if (!tied) compare("master params of unit", old_t->params, new_t->params);
  for (int s = 0; s < kSteps; ++s) {
    const double rel = std::fabs(old_t->losses[s] - new_t->losses[s]) / old_t->losses[s];
    bad += rel > (tied ? 1e-6 : 0.0);
  }
  return bad == 0 ? 0 : Fail(rank, std::to_string(bad) + " mismatches");
}

void RunWorld(int world, bool tied) {
  const int port = testing::PickFreePort();
  const auto codes = testing::RunProcesses(
      world, [&](int r) { return Rank(r, world, port, tied); }, std::chrono::seconds(120));
  for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(HsdpEmbeddingGrad, ReduceScatterEqualsSplitBitForBitOnTwoRanks) { RunWorld(2, /*tied=*/false); }

TEST(HsdpEmbeddingGrad, ReduceScatterMatchesSplitOnFourRanksTied) { RunWorld(4, /*tied=*/true); }

}  // namespace
}  // namespace hypertrain::parallel
