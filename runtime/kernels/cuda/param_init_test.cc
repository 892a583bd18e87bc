// InitParams against the CPU reference (model::InitUnitParams), bit for bit,
// for every unit of a model, a LoRA adapter layout and a large synthetic unit,
// each sharded over several world sizes the way HSDP shards it (rank r owns
// [r * S, (r + 1) * S) of a unit padded to a multiple of the world size).
#include "runtime/kernels/cuda/param_init.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/kernels/cuda/test_util.h"
#include "runtime/model/config.h"
#include "runtime/model/init.h"
#include "runtime/model/layout.h"
#include "runtime/model/peft.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;

// First element whose bits differ, or -1.
int64_t FirstBitDifference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(std::min(a.size(), b.size()));
}

void ExpectShardsMatchCpu(const model::ParamLayout& layout, uint64_t seed, int world) {
  for (const model::UnitLayout& u : layout.units()) {
    ASSERT_EQ(u.padded_numel % world, 0) << u.name;
    const int64_t S = u.padded_numel / world;
    for (int r = 0; r < world; ++r) {
      const model::Range range{r * S, (r + 1) * S};
      std::vector<float> want(S);
      model::InitUnitParams(layout, u.index, seed, range, want.data());
      const std::vector<model::InitSegment> seg = model::InitSegments(layout, u.index, range);
      DeviceBuffer<float> d(S);
      ASSERT_EQ(InitParams(seg.data(), static_cast<int>(seg.size()), seed, u.index, range.begin, S,
                           d.get(), nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = d.Download();
      const int64_t at = FirstBitDifference(got, want);
      ASSERT_EQ(at, -1) << u.name << " world " << world << " rank " << r << ": element "
                        << range.begin + at << " is " << got[at] << ", the CPU's " << want[at];
    }
  }
}

TEST(ParamInitTest, ModelShardsAreTheCpuValuesBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  model::ModelConfig c = *model::NamedModelConfig("tiny");
  c.tie_word_embeddings = false;  // an lm_head too
  for (int world : {1, 2, 3, 4, 8}) {
    auto l = model::ParamLayout::Build(c, {.pad_multiple = world});
    ASSERT_TRUE(l.ok());
    ExpectShardsMatchCpu(*l, 1234, world);
  }
}

TEST(ParamInitTest, LoraAdapterShardsAreTheCpuValuesBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = *model::NamedModelConfig("tiny");
  model::PeftOptions o;
  o.type = model::PeftType::kLora;
  o.rank = 8;
  for (int world : {1, 3}) {
    auto l = model::BuildAdapterLayout(c, o, {.pad_multiple = world});
    ASSERT_TRUE(l.ok());
    ExpectShardsMatchCpu(*l, 3, world);
  }
}

// 2^24 normal samples of a 1b-sized block tensor: a rounding difference in
// the log or cos would show here if anywhere (a wrong ulp in one sample of a
// few million).
TEST(ParamInitTest, ManyNormalSamplesAreTheCpuValuesBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  model::ModelConfig c = *model::NamedModelConfig("1b");
  c.num_hidden_layers = 1;
  auto l = model::ParamLayout::Build(c, {.pad_multiple = 4});
  ASSERT_TRUE(l.ok());
  const model::UnitLayout& u = l->unit(1);
  for (int r : {0, 3}) {
    const int64_t S = u.padded_numel / 4;
    const model::Range range{r * S, r * S + std::min<int64_t>(S, int64_t{1} << 24)};
    std::vector<float> want(range.size());
    model::InitUnitParams(*l, 1, 42, range, want.data());
    const auto seg = model::InitSegments(*l, 1, range);
    DeviceBuffer<float> d(range.size());
    ASSERT_EQ(InitParams(seg.data(), static_cast<int>(seg.size()), 42, 1, range.begin,
                         range.size(), d.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = d.Download();
    const int64_t at = FirstBitDifference(got, want);
    ASSERT_EQ(at, -1) << "element " << range.begin + at << ": " << got[at] << " vs " << want[at];
  }
}

TEST(ParamInitTest, RejectsSegmentsOutsideTheRange) {
  HT_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> d(16);
  const model::InitSegment s{8, 32, model::InitRule::kNormal, 1.0f};
  EXPECT_EQ(InitParams(&s, 1, 1, 1, 0, 16, d.get(), nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
