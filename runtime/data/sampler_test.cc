#include "runtime/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace hypertrain::data {
namespace {

TEST(SamplerTest, PermutationIsSeededAndComplete) {
  auto a = EpochPermutation(100, 7, 0), b = EpochPermutation(100, 7, 0);
  auto c = EpochPermutation(100, 7, 1), d = EpochPermutation(100, 8, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::sort(c.begin(), c.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(c[i], i);
}

TEST(SamplerTest, ResumesExactlyFromItsState) {
  Sampler full(23, 2, 3, 0, 1, {.seed = 5});
  std::vector<std::vector<int64_t>> want;
  SamplerState at3;
  for (int step = 0; step < 9; ++step) {
    if (step == 3) at3 = full.state();
    for (int m = 0; m < 3; ++m) want.push_back(full.NextMicroBatch());
  }
  EXPECT_GT(full.state().epoch, 0);  // 9 steps x 6 samples crossed epochs
  auto restored = SamplerState::FromJson(at3.ToJson());
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(*restored, at3);
  Sampler resumed(23, 2, 3, 0, 1, *restored);
  for (size_t i = 9; i < want.size(); ++i) EXPECT_EQ(resumed.NextMicroBatch(), want[i]) << i;
  EXPECT_FALSE(SamplerState::FromJson("{\"seed\": 1}").ok());
}

TEST(SamplerTest, RanksSplitTheSameGlobalBatch) {
  // 1 rank x 4 micro-batches == 2 ranks x 2 micro-batches == 4 ranks x 1.
  for (int step = 0; step < 3; ++step) {
    std::multiset<int64_t> one, two, four;
    Sampler s1(50, 2, 4, 0, 1, {.seed = 1});
    std::vector<Sampler> s2, s4;
    for (int r = 0; r < 2; ++r) s2.emplace_back(50, 2, 2, r, 2, SamplerState{.seed = 1});
    for (int r = 0; r < 4; ++r) s4.emplace_back(50, 2, 1, r, 4, SamplerState{.seed = 1});
    for (int k = 0; k <= step; ++k) {
      one.clear();
      two.clear();
      four.clear();
      for (int m = 0; m < 4; ++m) for (auto x : s1.NextMicroBatch()) one.insert(x);
      for (auto& s : s2) for (int m = 0; m < 2; ++m) for (auto x : s.NextMicroBatch()) two.insert(x);
      for (auto& s : s4) for (auto x : s.NextMicroBatch()) four.insert(x);
    }
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, four);
    EXPECT_EQ(one.size(), 8u);
  }
}

// One optimizer step's global batch in global order: rank by rank, each
// rank's micro-batches in order (offset (r * grad_accum + m) * micro_batch).
std::vector<int64_t> GlobalStep(std::vector<Sampler>& ranks, int grad_accum) {
  std::vector<int64_t> out;
  for (auto& s : ranks) {
    for (int m = 0; m < grad_accum; ++m) for (auto x : s.NextMicroBatch()) out.push_back(x);
  }
  return out;
}

std::vector<Sampler> Ranks(int world, int grad_accum, SamplerState state) {
  std::vector<Sampler> out;
  for (int r = 0; r < world; ++r) out.emplace_back(37, 2, grad_accum, r, world, state);
  return out;
}

TEST(SamplerTest, AnElasticResizeKeepsTheDataOrderExactly) {
  // 4 ranks x 2 micro-batches uninterrupted, against: 4 x 2 to step 3, then
  // 2 ranks x 4 (half the nodes, twice the accumulation) to step 7, then 4 x 2
  // again, each resumed from the state a checkpoint would save. 37 samples of
  // 16 per step: the resized part crosses epochs.
  std::vector<Sampler> full = Ranks(4, 2, {.seed = 9});
  std::vector<std::vector<int64_t>> want;
  for (int step = 0; step < 10; ++step) want.push_back(GlobalStep(full, 2));
  std::vector<Sampler> big = Ranks(4, 2, {.seed = 9});
  std::vector<std::vector<int64_t>> got;
  for (int step = 0; step < 3; ++step) got.push_back(GlobalStep(big, 2));
  std::vector<Sampler> small = Ranks(2, 4, big[0].state());
  for (int step = 3; step < 7; ++step) got.push_back(GlobalStep(small, 4));
  std::vector<Sampler> back = Ranks(4, 2, small[1].state());
  for (int step = 7; step < 10; ++step) got.push_back(GlobalStep(back, 2));
  EXPECT_EQ(got, want);
  EXPECT_EQ(back[0].state(), full[3].state());
}

}  // namespace
}  // namespace hypertrain::data
