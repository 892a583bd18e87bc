#include "runtime/model/unit_pool.h"

#include <gtest/gtest.h>

#include "runtime/model/config.h"

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

// Owned ranges of shard rank 0 of 2 over `layout`.
std::vector<Range> FirstHalf(const ParamLayout& layout) {
  std::vector<Range> owned;
  for (const auto& u : layout.units()) owned.push_back({0, u.padded_numel / 2});
  return owned;
}

TEST(UnitPoolPlan, SlotsBySizeAndClearErrors) {
  auto cfg = NamedModelConfig("tiny");
  ASSERT_TRUE(cfg.ok());
  LayoutOptions lo;
  lo.pad_multiple = 2 * 64;
  auto layout = ParamLayout::Build(*cfg, lo);
  ASSERT_TRUE(layout.ok());
  BackendOptions o;
  o.layout = lo;
  o.unit_pool = true;
  o.pool_param_slots = 99;  // more than blocks: capped at one per block
  o.owned = FirstHalf(*layout);
  auto plan = PlanUnitPool(*layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->slot_numel[0], layout->unit(0).padded_numel);
  EXPECT_EQ(plan->slot_numel[1], layout->unit(1).padded_numel);
  EXPECT_EQ(plan->param_slots[0], 1);
  EXPECT_EQ(plan->param_slots[1], cfg->num_hidden_layers);
  EXPECT_EQ(plan->grad_slots[0], 1);
  EXPECT_EQ(plan->grad_slots[1], 2);
  EXPECT_EQ(PoolKind(0), 0);
  EXPECT_EQ(PoolKind(1), 1);
  UnitSlots blocks = plan->ParamSlots(1, layout->num_units());
  for (int l = 0; l < cfg->num_hidden_layers; ++l) EXPECT_TRUE(blocks.Acquire(1 + l).ok());
  auto grads = plan->GradSlots(0, layout->num_units());
  EXPECT_TRUE(grads.Acquire(0).ok());
  auto full = grads.Acquire(0);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("embedding grad pool"), std::string::npos);

  auto expect_error = [&](BackendOptions bad, const std::string& what) {
    auto p = PlanUnitPool(*layout, bad);
    ASSERT_FALSE(p.ok()) << what;
    EXPECT_NE(p.status().message().find(what), std::string::npos) << p.status().ToString();
  };
  BackendOptions no_owned = o;
  no_owned.owned.clear();
  expect_error(no_owned, "needs owned ranges");
  BackendOptions no_slots = o;
  no_slots.pool_param_slots = 0;
  expect_error(no_slots, "pool_param_slots must be >= 1, got 0");
  BackendOptions whole = o;
  whole.owned[1] = {0, layout->unit(1).padded_numel};
  expect_error(whole, "unit 1 is owned whole");
}

}  // namespace
}  // namespace hypertrain::model
