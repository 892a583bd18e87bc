#include <gtest/gtest.h>

#include "runtime/data/tokenizer/byte_level.h"
#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

TEST(Utf8, DecodesAndRejects) {
  uint32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("A", 1, &cp), 1);
  EXPECT_EQ(cp, 0x41u);
  EXPECT_EQ(DecodeUtf8("\xED\x95\x9C", 3, &cp), 3);  // 한
  EXPECT_EQ(cp, 0xD55Cu);
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\x91\x8D", 4, &cp), 4);  // 👍
  EXPECT_EQ(cp, 0x1F44Du);
  EXPECT_EQ(DecodeUtf8("\xC0\xAF", 2, &cp), 0);          // overlong '/'
  EXPECT_EQ(DecodeUtf8("\xED\xA0\x80", 3, &cp), 0);      // surrogate
  EXPECT_EQ(DecodeUtf8("\xE2\x82", 2, &cp), 0);          // truncated
  EXPECT_EQ(DecodeUtf8("\xF4\x90\x80\x80", 4, &cp), 0);  // > U+10FFFF
  EXPECT_EQ(DecodeUtf8("\x80", 1, &cp), 0);
}

TEST(Utf8, RepairReplacesEachBadSequence) {
  std::string out;
  EXPECT_EQ(RepairUtf8("ok \xED\x95\x9C", &out), 0u);
  EXPECT_EQ(out, "ok \xED\x95\x9C");
  EXPECT_EQ(RepairUtf8("a\xFF" "b\xE2\x82" "c\xC3", &out), 3u);
  EXPECT_EQ(out, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(out));
  EXPECT_FALSE(IsValidUtf8("long ascii prefix to cross the 8-byte fast path \xFF"));
}

TEST(ByteLevel, EveryByteRoundTripsThroughTheAlphabet) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string shown = EncodeByteLevel(all);
  EXPECT_TRUE(IsValidUtf8(shown));
  std::string back;
  ASSERT_TRUE(DecodeByteLevel(shown, &back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(ByteToChar(' '), 0x120u);  // "Ġ"
  EXPECT_EQ(ByteToChar('\n'), 0x10Au); // "Ċ"
  EXPECT_EQ(ByteToChar('a'), static_cast<uint32_t>('a'));
  EXPECT_FALSE(DecodeByteLevel("\xE2\x96\x81", &back));  // "▁" is not in the alphabet
}

}  // namespace
}  // namespace hypertrain::tokenizer
