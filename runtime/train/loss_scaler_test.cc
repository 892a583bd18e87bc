#include "runtime/train/loss_scaler.h"

#include <gtest/gtest.h>

#include "runtime/train/lr_schedule.h"

namespace hypertrain::train {
namespace {

TEST(LossScalerTest, SkipBackoffAndGrow) {
  LossScaler s({.enabled = true, .initial_scale = 1024, .growth_factor = 2, .backoff_factor = 0.5,
                .growth_interval = 3, .min_scale = 1, .max_scale = 4096});
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_FALSE(s.Update(false));  // inf/nan: skip and back off
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.state().skipped_steps, 1);
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.Update(true));  // third good step: grow
  EXPECT_EQ(s.scale(), 1024);
  for (int i = 0; i < 12; ++i) s.Update(true);
  EXPECT_EQ(s.scale(), 4096);  // capped
  for (int i = 0; i < 20; ++i) s.Update(false);
  EXPECT_EQ(s.scale(), 1);  // floored
}

TEST(LossScalerTest, DisabledKeepsScaleOneButReportsSkip) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LrScheduleTest, WarmupCosineMin) {
  LrSchedule s{ScheduleKind::kCosine, 1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(9), 1.0);
  EXPECT_DOUBLE_EQ(s.At(10), 1.0);
  EXPECT_NEAR(s.At(60), 0.55, 1e-12);
  EXPECT_NEAR(s.At(110), 0.1, 1e-12);
  EXPECT_NEAR(s.At(500), 0.1, 1e-12);
  EXPECT_FALSE(ParseScheduleKind("poly").ok());
}

}  // namespace
}  // namespace hypertrain::train
