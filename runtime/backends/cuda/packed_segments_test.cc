// Packed rows as segments (CPU-runnable): samples in token order with their
// lengths, lse offsets 16-byte aligned and inside the planned buffer, whole
// rows collapsing to none, bad positions named.
#include "runtime/backends/cuda/packed_segments.h"

#include <gtest/gtest.h>

#include <vector>

namespace hypertrain::cuda {
namespace {

std::vector<int32_t> Positions(const std::vector<std::vector<int>>& rows) {
  std::vector<int32_t> p;
  for (const auto& row : rows) {
    for (int len : row) {
      for (int i = 0; i < len; ++i) p.push_back(i);
    }
  }
  return p;
}

TEST(PackedSegmentsTest, SamplesInTokenOrderWithAlignedLse) {
  const std::vector<int32_t> pos = Positions({{10, 30, 24}, {1, 63}});
  const int64_t heads = 3;
  auto s = PackedSegments(pos.data(), 2, 64, heads);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::vector<std::pair<int, int>> want = {{0, 10}, {10, 30}, {40, 24}, {64, 1}, {65, 63}};
  ASSERT_EQ(s->size(), want.size());
  int64_t end = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*s)[i].row, want[i].first) << i;
    EXPECT_EQ((*s)[i].len, want[i].second) << i;
    EXPECT_EQ((*s)[i].lse % 4, 0) << i;
    EXPECT_GE((*s)[i].lse, end) << i;  // no overlap with the previous sample's lse
    end = (*s)[i].lse + heads * (*s)[i].len;
  }
  EXPECT_LE(end, 2 * 64 * (heads + 4));
}

TEST(PackedSegmentsTest, OneSamplePerRowIsNone) {
  const std::vector<int32_t> pos = Positions({{64}, {64}});
  auto s = PackedSegments(pos.data(), 2, 64, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->empty());
  // One whole row and one packed: every sample is a segment.
  const std::vector<int32_t> mixed = Positions({{64}, {32, 32}});
  s = PackedSegments(mixed.data(), 2, 64, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 3u);
}

TEST(PackedSegmentsTest, OneTokenSamplesFitThePlannedBuffer) {
  std::vector<int32_t> pos(4 * 16, 0);  // every token its own sample
  auto s = PackedSegments(pos.data(), 4, 16, 1);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 64u);
  EXPECT_LE(s->back().lse + 1, 4 * 16 * (1 + 4));
}

TEST(PackedSegmentsTest, BadPositionsAreNamed) {
  std::vector<int32_t> pos = Positions({{8, 8}, {16}});
  pos[19] = 7;  // row 1, token 3: neither 2 + 1 nor 0
  auto s = PackedSegments(pos.data(), 2, 16, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("positions[1][3] = 7"), std::string::npos)
      << s.status().ToString();
  pos = Positions({{8, 8}, {16}});
  pos[0] = 1;  // a row must start at 0
  EXPECT_FALSE(PackedSegments(pos.data(), 2, 16, 2).ok());
}

}  // namespace
}  // namespace hypertrain::cuda
