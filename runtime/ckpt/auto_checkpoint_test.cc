// auto_checkpoint's interval rule (train_hooks.h): bounded save overhead,
// bounded lost work, a floor.
#include <gtest/gtest.h>

#include "runtime/ckpt/train_hooks.h"

namespace hypertrain::ckpt {
namespace {

TEST(AutoCheckpoint, IntervalBoundsOverheadAndLostWork) {
  config::CheckpointConfig k;
  k.auto_max_overhead = 0.02;
  k.auto_max_lost_minutes = 30;
  k.auto_min_interval_s = 60;
  // A 2 s stall at <= 2% overhead: every 100 s.
  EXPECT_DOUBLE_EQ(AutoCheckpointInterval(2.0, k), 100.0);
  // A tiny stall: the floor.
  EXPECT_DOUBLE_EQ(AutoCheckpointInterval(0.01, k), 60.0);
  // A 60 s stall would need 3000 s: at most 30 minutes of work is lost instead.
  EXPECT_DOUBLE_EQ(AutoCheckpointInterval(60.0, k), 1800.0);
  k.auto_min_interval_s = 0;
  EXPECT_GT(AutoCheckpointInterval(0.0, k), 0.0);  // never "off"
}

}  // namespace
}  // namespace hypertrain::ckpt
