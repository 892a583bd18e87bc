// The init math against the C library, and rank-sharded initialisation
// against slices of the whole unit (what a resharded resume relies on).
#include "runtime/model/init.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/model/config.h"
#include "runtime/model/layout.h"
#include "runtime/model/peft.h"

namespace hypertrain::model {
namespace {

// Distance in units in the last place between two finite doubles of one sign.
int64_t Ulps(double a, double b) {
  int64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  return x > y ? x - y : y - x;
}

TEST(InitMathTest, LogAndCosAreWithinTwoUlpsOfTheCLibrary) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t h = rng();
    const double u1 = (static_cast<double>(h >> 40) + 1.0) / 16777217.0;
    if (u1 != 1.0) {
      ASSERT_LE(Ulps(init_math::Log(u1), std::log(u1)), 2) << u1;
    }
    const double x = 6.283185307179586 * (static_cast<double>(h & 0xFFFFFF) / 16777216.0);
    // Near a zero of cos the relative error means nothing: compare absolutely there.
    const double want = std::cos(x);
    if (std::abs(want) > 1e-3) {
      ASSERT_LE(Ulps(init_math::Cos(x), want), 2) << x;
    } else {
      ASSERT_NEAR(init_math::Cos(x), want, 1e-18) << x;
    }
  }
  EXPECT_EQ(init_math::Log(1.0), 0.0);
  EXPECT_EQ(init_math::Cos(0.0), 1.0);
}

// The samples are the C library's Box-Muller but in rare rounding ties, so a
// model initialised before the math was made portable starts the same.
TEST(InitMathTest, NormalSamplesAreTheCLibrarysButInRareTies) {
  int differ = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    const uint64_t h = init_math::Hash(5, 3, static_cast<uint64_t>(i));
    const double u1 = (static_cast<double>(h >> 40) + 1.0) / 16777217.0;
    const double u2 = static_cast<double>(h & 0xFFFFFF) / 16777216.0;
    const float libm = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                          std::cos(6.283185307179586 * u2));
    differ += NormalAt(5, 3, static_cast<uint64_t>(i)) != libm;
  }
  EXPECT_LE(differ, 2) << "of " << n;
}

// Every rank of every world size initialising only its own shard gets the
// slice of the whole unit, for a plain model (tied and untied) and adapters.
TEST(InitTest, RankShardsEqualSlicesOfTheWholeUnit) {
  ModelConfig tied = *NamedModelConfig("tiny");
  ModelConfig untied = tied;
  untied.tie_word_embeddings = false;
  PeftOptions lora;
  lora.type = PeftType::kLora;
  lora.rank = 4;
  for (int world : {1, 2, 3, 8, 16}) {
    std::vector<ParamLayout> layouts = {*ParamLayout::Build(tied, {.pad_multiple = world}),
                                        *ParamLayout::Build(untied, {.pad_multiple = world}),
                                        *BuildAdapterLayout(tied, lora, {.pad_multiple = world})};
    for (const ParamLayout& l : layouts) {
      for (const UnitLayout& u : l.units()) {
        std::vector<float> whole(u.padded_numel);
        InitUnitParams(l, u.index, 99, {0, u.padded_numel}, whole.data());
        const int64_t S = u.padded_numel / world;
        ASSERT_EQ(S * world, u.padded_numel);
        for (int r = 0; r < world; ++r) {
          std::vector<float> shard(S);
          InitUnitParams(l, u.index, 99, {r * S, (r + 1) * S}, shard.data());
          ASSERT_EQ(std::memcmp(shard.data(), whole.data() + r * S, S * sizeof(float)), 0)
              << u.name << " world " << world << " rank " << r;
        }
      }
    }
  }
}

TEST(InitTest, SegmentsAreClippedToTheRangeInOrder) {
  const ParamLayout l = *ParamLayout::Build(*NamedModelConfig("tiny"));
  const UnitLayout& u = l.unit(1);
  const TensorSlot& q = u.tensors[kQProj];
  const Range r{q.offset + 10, q.offset + q.numel + 5};
  const std::vector<InitSegment> s = InitSegments(l, 1, r);
  ASSERT_GE(s.size(), 1u);
  EXPECT_EQ(s[0].begin, r.begin);
  EXPECT_EQ(s[0].end, q.offset + q.numel);
  EXPECT_EQ(s[0].rule, InitRule::kNormal);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_GE(s[i].begin, s[i - 1].end);
    EXPECT_LE(s[i].end, r.end);
  }
  EXPECT_TRUE(InitSegments(l, 1, {u.padded_numel, u.padded_numel}).empty());
}

}  // namespace
}  // namespace hypertrain::model
