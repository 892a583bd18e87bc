#include "contract/instance_types.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

TEST(InstanceTypesTest, KnownTypesMatchTheReferenceTable) {
  auto p5 = LookupInstanceType("ml.p5.48xlarge");
  ASSERT_TRUE(p5.has_value());
  EXPECT_EQ(p5->gpus, 8);
  EXPECT_EQ(p5->efa_devices, 32);
  EXPECT_TRUE(p5->gpudirect_rdma);

  auto p4d = LookupInstanceType("ml.p4d.24xlarge");
  ASSERT_TRUE(p4d.has_value());
  EXPECT_EQ(p4d->gpus, 8);
  EXPECT_EQ(p4d->efa_devices, 4);
  EXPECT_TRUE(p4d->gpudirect_rdma);

  auto p5en = LookupInstanceType("ml.p5en.48xlarge");
  ASSERT_TRUE(p5en.has_value());
  EXPECT_EQ(p5en->efa_devices, 16);

  auto g5 = LookupInstanceType("ml.g5.48xlarge");
  ASSERT_TRUE(g5.has_value());
  EXPECT_EQ(g5->gpus, 8);
  EXPECT_EQ(g5->efa_devices, 1);
  EXPECT_FALSE(g5->gpudirect_rdma);

  auto g512 = LookupInstanceType("ml.g5.12xlarge");
  ASSERT_TRUE(g512.has_value());
  EXPECT_EQ(g512->gpus, 4);
  EXPECT_EQ(g512->efa_devices, 1);
}

// What `hypertrain estimate` reads: memory per GPU and the dense bf16 peak.
TEST(InstanceTypesTest, GpuMemoryAndPeakPerGpu) {
  auto p5 = LookupInstanceType("ml.p5.48xlarge");
  ASSERT_TRUE(p5.has_value());
  EXPECT_EQ(p5->gpu_memory_mib, 81559);
  EXPECT_EQ(p5->gpu_memory_bytes(), int64_t{81559} << 20);
  EXPECT_DOUBLE_EQ(p5->peak_bf16_tflops, 989.4);
  EXPECT_EQ(LookupInstanceType("ml.p5en.48xlarge")->gpu_memory_mib, 143771);
  EXPECT_EQ(LookupInstanceType("ml.p4d.24xlarge")->gpu_memory_mib, 40960);
  EXPECT_DOUBLE_EQ(LookupInstanceType("ml.p4de.24xlarge")->peak_bf16_tflops, 312.0);
  for (const auto& t : KnownInstanceTypes()) {
    EXPECT_GT(t.gpu_memory_mib, 16 * 1024) << t.name;
    // A peak is either a datasheet's dense bf16 figure or 0 (not known here).
    EXPECT_TRUE(t.peak_bf16_tflops == 0 || t.peak_bf16_tflops > 100.0) << t.name;
  }
  // Unchecked sizes are the decimal marketed size, below the driver's figure.
  EXPECT_EQ(LookupInstanceType("ml.p6-b200.48xlarge")->gpu_memory_mib, 179LL * 1000 * 1000 * 1000 / (1 << 20));
  EXPECT_EQ(LookupInstanceType("ml.p6-b200.48xlarge")->peak_bf16_tflops, 0);
  EXPECT_DOUBLE_EQ(LookupInstanceType("ml.g6e.48xlarge")->peak_bf16_tflops, 362.05);
}

TEST(InstanceTypesTest, NamesNeedTheMlPrefix) {
  EXPECT_FALSE(LookupInstanceType("p5.48xlarge").has_value());
  EXPECT_FALSE(LookupInstanceType("ml.p9.48xlarge").has_value());
  for (const auto& t : KnownInstanceTypes()) {
    EXPECT_EQ(t.name.rfind("ml.", 0), 0u) << t.name;
    EXPECT_GT(t.gpus, 0) << t.name;
    EXPECT_FALSE(t.gpu_model.empty()) << t.name;
    // RDMA over EFA needs EFA devices.
    if (t.gpudirect_rdma) {
      EXPECT_GT(t.efa_devices, 0) << t.name;
    }
  }
}

}  // namespace
}  // namespace hypertrain::contract
