// PeftDataParallelHooks with a sharded frozen base, 2 real processes over
// Gloo on CPU: blocks are gathered before each forward and each backward and
// released after; the embedding unit (embedding, final norm, LM head: the
// largest, and frozen) is gathered once and kept across passes and steps,
// and gathered again only after someone else released it (as the merged
// export does). The losses equal those of one process with the whole base.
#include "runtime/parallel/peft_hooks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/backends/cpu/backend.h"
#include "runtime/model/config.h"
#include "runtime/parallel/multiprocess_testing.h"

namespace hypertrain::parallel {
namespace {

constexpr int kWorld = 2, kSeq = 16, kPasses = 3;

model::ModelConfig Config() {
  model::ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 2;
  c.max_context_width = kSeq;
  return c;
}

model::BackendOptions Options(int rank, int shards) {
  model::BackendOptions o;
  o.micro_batch_size = 1;
  o.seq_len = kSeq;
  o.peft.type = model::PeftType::kLora;
  o.peft.rank = 4;
  o.peft.alpha = 8;
  o.base_shard = {rank, shards};
  return o;
}

std::vector<int32_t> Tokens(int pass, int64_t vocab) {
  std::mt19937_64 rng(77 + pass);
  std::vector<int32_t> t(kSeq);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// The passes' losses on one process with the whole base (same batch on every
// rank below, so the gradients' average is this process's gradient).
std::vector<double> WholeBaseLosses() {
  auto b = cpu::CpuBackend::Create(Config(), Options(0, 1));
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  model::NoOpUnitHooks none;
  std::vector<double> losses;
  for (int p = 0; p < kPasses; ++p) {
    const std::vector<int32_t> t = Tokens(p, Config().vocab_size);
    auto l = (*b)->ForwardBackward({t.data(), t.data(), 1, kSeq}, 1.0f, none);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    losses.push_back(l.ok() ? *l : -1);
  }
  return losses;
}

int Check(bool ok, int rank, const char* what) {
  if (!ok) std::fprintf(stderr, "rank %d: %s\n", rank, what);
  return ok ? 0 : 1;
}

int Rank(int rank, int port, const std::vector<double>& want) {
  auto ctx = testing::LocalGlooContext(rank, kWorld, kWorld, port, "peft-hooks-test",
                                       ShardingStrategy::kFullShard);
  if (!ctx.ok()) return Check(false, rank, ctx.status().ToString().c_str());
  auto b = cpu::CpuBackend::Create(Config(), Options(rank, kWorld));
  if (!b.ok()) return Check(false, rank, b.status().ToString().c_str());
  auto hooks = PeftDataParallelHooks::Create(**ctx, **b);
  if (!hooks.ok()) return Check(false, rank, hooks.status().ToString().c_str());
  const int E = model::ParamLayout::kEmbeddingUnit, B0 = model::ParamLayout::BlockUnit(0),
            B1 = model::ParamLayout::BlockUnit(1);
  int bad = 0;
  for (int p = 0; p < kPasses; ++p) {
    const std::vector<int32_t> t = Tokens(p, Config().vocab_size);
    if (!(*hooks)->BeginMicroBatch(0, true).ok()) return Check(false, rank, "BeginMicroBatch");
    auto l = (*b)->ForwardBackward({t.data(), t.data(), 1, kSeq}, 1.0f, **hooks);
    if (!l.ok()) return Check(false, rank, l.status().ToString().c_str());
    if (!(*hooks)->FinishGradients().ok()) return Check(false, rank, "FinishGradients");
    bad += Check(*l == want[p], rank, "loss differs from the whole base's");
    // Blocks: one gather for the forward, one for the backward, per pass.
    bad += Check((*hooks)->BaseGathers(B0) == 2 * (p + 1), rank, "block 0 gathers");
    bad += Check((*hooks)->BaseGathers(B1) == 2 * (p + 1), rank, "block 1 gathers");
    bad += Check((*hooks)->BaseGathers(E) == 1, rank, "embedding gathered more than once");
    bad += Check((*b)->BaseSlot(E) != nullptr, rank, "embedding released");
    bad += Check((*b)->BaseSlot(B0) == nullptr && (*b)->BaseSlot(B1) == nullptr, rank,
                 "a block kept its slot");
  }
  // Someone else (the merged export) gathers and releases the embedding unit:
  // the next pass gathers it again and computes the same loss.
  if (!(*b)->GatherBase(E).ok() || !(*b)->ReleaseBase(E).ok()) return Check(false, rank, "export");
  bad += Check((*hooks)->BaseGathers(E) == 1, rank, "GatherBase of a held unit gathered");
  const std::vector<int32_t> t = Tokens(0, Config().vocab_size);
  auto l = (*b)->Loss({t.data(), t.data(), 1, kSeq}, **hooks);
  if (!l.ok()) return Check(false, rank, l.status().ToString().c_str());
  bad += Check((*hooks)->BaseGathers(E) == 2, rank, "released embedding not gathered again");
  bad += Check(std::isfinite(*l), rank, "loss after the re-gather");
  return bad;
}

TEST(PeftHooks, EmbeddingUnitIsGatheredOnceAndBlocksPerPass) {
  const std::vector<double> want = WholeBaseLosses();
  ASSERT_EQ(want.size(), static_cast<size_t>(kPasses));
  const int port = testing::PickFreePort();
  const auto codes = testing::RunProcesses(kWorld, [&](int r) { return Rank(r, port, want); },
                                           std::chrono::seconds(60));
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace hypertrain::parallel
