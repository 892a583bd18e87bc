#include "runtime/kernels/tune_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

namespace hypertrain::kernels {
namespace {

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string t = std::string(base != nullptr ? base : "/tmp") + "/tuneXXXXXX";
  return mkdtemp(t.data());
}

const TuneCache::Context kH100 = {{"device", "NVIDIA H100 80GB HBM3"}, {"cublaslt", "130100"}};

TEST(TuneCacheTest, RoundTripsForTheSameContext) {
  const std::string path = TempDir() + "/tune_cache.json";
  std::string note;
  TuneCache c = TuneCache::Open(path, kH100, &note);
  EXPECT_EQ(note, "none: no file yet");
  EXPECT_EQ(c.size(), 0u);
  c.Put("gemm m=8 n=16 k=32", "00ff");
  c.Put("gemm m=1 n=2 k=3", "abcd");
  ASSERT_TRUE(c.Save().ok());
  TuneCache back = TuneCache::Open(path, kH100, &note);
  EXPECT_EQ(note, "2 entries");
  EXPECT_EQ(back.Get("gemm m=8 n=16 k=32"), "00ff");
  EXPECT_EQ(back.Get("gemm m=1 n=2 k=3"), "abcd");
  EXPECT_FALSE(back.Get("gemm m=2 n=2 k=3").has_value());
}

// Another device or library version, another format, garbage: an empty cache
// (never an error), and the next save replaces the file.
TEST(TuneCacheTest, IgnoresFilesOfAnotherContextOrFormat) {
  const std::string path = TempDir() + "/tune_cache.json";
  {
    TuneCache c = TuneCache::Open(path, kH100);
    c.Put("k", "01");
    ASSERT_TRUE(c.Save().ok());
  }
  std::string note;
  TuneCache::Context h200 = kH100;
  h200["device"] = "NVIDIA H200";
  EXPECT_EQ(TuneCache::Open(path, h200, &note).size(), 0u);
  EXPECT_EQ(note, "none: written for device NVIDIA H100 80GB HBM3");
  TuneCache::Context newer = kH100;
  newer["cublaslt"] = "130200";
  EXPECT_EQ(TuneCache::Open(path, newer, &note).size(), 0u);
  EXPECT_EQ(note, "none: written for cublaslt 130100");
  TuneCache::Context more = kH100;
  more["cudnn"] = "91000";
  EXPECT_EQ(TuneCache::Open(path, more, &note).size(), 0u);
  EXPECT_EQ(note, "none: written for cudnn (none)");
  TuneCache::Context fewer = {{"device", "NVIDIA H100 80GB HBM3"}};
  EXPECT_EQ(TuneCache::Open(path, fewer, &note).size(), 0u);
  EXPECT_EQ(note, "none: written for cublaslt (not in this build's context)");

  for (const char* text : {"not json", "[]", R"({"format":"hypertrain-tune-cache/0","context":{},"entries":{}})",
                           R"({"format":"hypertrain-tune-cache/1","context":{}})"}) {
    std::ofstream(path) << text;
    EXPECT_EQ(TuneCache::Open(path, kH100, &note).size(), 0u) << text;
    EXPECT_EQ(note, "none: not a tune cache of this version") << text;
  }
  TuneCache c = TuneCache::Open(path, h200);
  c.Put("k", "02");
  ASSERT_TRUE(c.Save().ok());
  EXPECT_EQ(TuneCache::Open(path, h200).Get("k"), "02");
}

TEST(TuneCacheTest, SavesOnlyWhatChanged) {
  const std::string dir = TempDir();
  const std::string path = dir + "/tune_cache.json";
  TuneCache c = TuneCache::Open(path, kH100);
  ASSERT_TRUE(c.Save().ok());
  EXPECT_FALSE(std::ifstream(path).good()) << "nothing put, nothing written";
  c.Put("k", "01");
  ASSERT_TRUE(c.Save().ok());
  std::remove(path.c_str());
  c.Put("k", "01");  // unchanged
  ASSERT_TRUE(c.Save().ok());
  EXPECT_FALSE(std::ifstream(path).good());
  TuneCache nested = TuneCache::Open(dir + "/exp/not-yet/tune_cache.json", kH100);
  nested.Put("k", "01");
  ASSERT_TRUE(nested.Save().ok()) << "the folder is made";
  EXPECT_EQ(TuneCache::Open(dir + "/exp/not-yet/tune_cache.json", kH100).Get("k"), "01");
  std::ofstream(dir + "/a-file") << "x";
  TuneCache bad = TuneCache::Open(dir + "/a-file/tune_cache.json", kH100);
  bad.Put("k", "01");
  const Status s = bad.Save();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a-file"), std::string::npos) << s.message();
}

TEST(TuneCacheTest, HexRoundTripsAndRejectsMalformedText) {
  const unsigned char bytes[] = {0x00, 0x7f, 0x80, 0xff, 0x12};
  const std::string hex = ToHex(bytes, sizeof(bytes));
  EXPECT_EQ(hex, "007f80ff12");
  unsigned char back[5] = {};
  ASSERT_TRUE(FromHex(hex, back, sizeof(back)));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(back), 5), std::string(reinterpret_cast<const char*>(bytes), 5));
  EXPECT_FALSE(FromHex("007f80ff", back, sizeof(back)));    // short
  EXPECT_FALSE(FromHex("007f80ff1g", back, sizeof(back)));  // not hex
  EXPECT_FALSE(FromHex("007F80FF12", back, sizeof(back)));  // we write lowercase only
}

}  // namespace
}  // namespace hypertrain::kernels
