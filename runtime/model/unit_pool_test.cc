#include "runtime/model/unit_pool.h"

#include <gtest/gtest.h>

namespace hypertrain::model {
namespace {

TEST(UnitSlots, FifoReuseAndErrors) {
  UnitSlots s(5, 2, "block params");
  EXPECT_EQ(*s.Acquire(1), 0);
  EXPECT_EQ(*s.Acquire(2), 1);
  EXPECT_EQ(s.held(), 2);
  // Out of slots: a clear error naming the pool, never a silent reuse.
  auto full = s.Acquire(3);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("block params"), std::string::npos);
  EXPECT_FALSE(s.Acquire(1).ok());  // already held
  EXPECT_EQ(*s.Release(1), 0);
  EXPECT_FALSE(s.Release(1).ok());  // not held any more
  EXPECT_EQ(s.slot(1), -1);
  EXPECT_EQ(*s.Acquire(3), 0);
  EXPECT_EQ(*s.Release(2), 1);
  EXPECT_EQ(*s.Release(3), 0);
  // First released, first reused: slot 1 went back before slot 0.
  EXPECT_EQ(*s.Acquire(4), 1);
  EXPECT_EQ(*s.Acquire(0), 0);
  EXPECT_FALSE(s.Acquire(7).ok());
}

}  // namespace
}  // namespace hypertrain::model
