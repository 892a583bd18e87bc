#include "contract/precision.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

TEST(Precision, NamesRoundTrip) {
  for (Precision p : {Precision::kBF16, Precision::kFP16, Precision::kFP32, Precision::kTF32}) {
    EXPECT_EQ(ParsePrecision(PrecisionName(p)), p) << PrecisionName(p);
  }
  for (Checkpointing c : {Checkpointing::kNone, Checkpointing::kSelective, Checkpointing::kFull}) {
    EXPECT_EQ(ParseCheckpointing(CheckpointingName(c)), c) << CheckpointingName(c);
  }
}

TEST(Precision, RecipeSpellings) {
  EXPECT_EQ(ParsePrecision("bf16-mixed"), Precision::kBF16);
  EXPECT_EQ(ParsePrecision("16-mixed"), Precision::kFP16);
  EXPECT_EQ(ParsePrecision("32"), Precision::kFP32);
  EXPECT_EQ(ParsePrecision("BF16"), std::nullopt);
  EXPECT_EQ(ParsePrecision(""), std::nullopt);
  EXPECT_EQ(ParseCheckpointing("True"), Checkpointing::kFull);
  EXPECT_EQ(ParseCheckpointing("FALSE"), Checkpointing::kNone);
  EXPECT_EQ(ParseCheckpointing("1"), Checkpointing::kFull);
  EXPECT_EQ(ParseCheckpointing("partial"), std::nullopt);
}

}  // namespace
}  // namespace hypertrain::contract
