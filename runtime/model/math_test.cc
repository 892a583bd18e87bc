#include "runtime/model/math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hypertrain::model {
namespace {

TEST(MathTest, RopeLlama3FrequencyRegimes) {
  // Llama-3.2-1B: D 64, theta 5e5, factor 32, low 1, high 4, original 8192.
  RopeScaling s{RopeScalingType::kLlama3, 32.0, 1.0, 4.0, 8192};
  const int64_t D = 64;
  double plain[32], scaled[32];
  RopeInvFreq(plain, D, 500000.0, {});
  RopeInvFreq(scaled, D, 500000.0, s);
  for (int i = 0; i < 32; ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    EXPECT_DOUBLE_EQ(plain[i], std::pow(500000.0, -2.0 * i / D));
    if (wavelen < 8192 / 4.0) {
      EXPECT_DOUBLE_EQ(scaled[i], plain[i]) << i;  // high frequency kept
    } else if (wavelen > 8192) {
      EXPECT_DOUBLE_EQ(scaled[i], plain[i] / 32) << i;  // low frequency scaled
    } else {
      EXPECT_LT(scaled[i], plain[i]);
      EXPECT_GT(scaled[i], plain[i] / 32);
    }
  }
}

TEST(MathTest, CountTargetsSkipsIgnoreIndex) {
  const std::vector<int32_t> t = {3, -100, 0, 6, -100};
  EXPECT_EQ(CountTargets(t.data(), 5, -100), 3);
  EXPECT_EQ(CountTargets(t.data(), 2, -100), 1);
  EXPECT_EQ(CountTargets(t.data(), 5, 0), 4);
  EXPECT_EQ(CountTargets(t.data(), 0, -100), 0);
}

TEST(MathTest, ClipFactor) {
  EXPECT_EQ(ClipFactor(0.5, 1.0), 1.0);
  EXPECT_NEAR(ClipFactor(4.0, 1.0), 0.25, 1e-6);
  EXPECT_EQ(ClipFactor(4.0, 0.0), 1.0);
  EXPECT_EQ(ClipFactor(INFINITY, 1.0), 1.0);
  EXPECT_EQ(ClipFactor(NAN, 1.0), 1.0);
}

}  // namespace
}  // namespace hypertrain::model
