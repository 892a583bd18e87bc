#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hypertrain {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) test vectors.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32cHex(0xE3069283u), "e3069283");
}

TEST(Crc32c, PortableMatchesAcceleratedAndExtendComposes) {
  std::string data;
  for (int i = 0; i < 10007; ++i) data.push_back(static_cast<char>((i * 131) ^ (i >> 3)));
  for (size_t start : {0, 1, 3, 7}) {
    const char* p = data.data() + start;
    const size_t n = data.size() - start;
    EXPECT_EQ(Crc32cExtendPortable(0, p, n), Crc32c(p, n));
    const uint32_t a = Crc32cExtend(Crc32c(p, 1000), p + 1000, n - 1000);
    EXPECT_EQ(a, Crc32c(p, n));
  }
}

}  // namespace
}  // namespace hypertrain
