#include "runtime/data/shard.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hypertrain::data {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path p = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(ShardTest, RoundTripUint16AndUint32) {
  const std::string dir = TempDir("shard_rt");
  for (int bpt : {2, 4}) {
    std::vector<uint32_t> toks = {0, 1, 255, 65535, 7};
    if (bpt == 4) toks.push_back(128255);
    const std::string path = dir + "/s" + std::to_string(bpt) + ".bin";
    ASSERT_TRUE(WriteShard(path, toks, bpt, 1000).ok());
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    auto f = TokenFile::OpenShard(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->num_tokens(), static_cast<int64_t>(toks.size()));
    EXPECT_EQ((*f)->bytes_per_token(), bpt);
    EXPECT_EQ((*f)->vocab_size(), 1000u);
    std::vector<int32_t> out(toks.size() - 1);
    (*f)->Read(1, out.size(), out.data());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(static_cast<uint32_t>(out[i]), toks[i + 1]);
  }
  EXPECT_FALSE(WriteShard(dir + "/x.bin", {70000}, 2, 0).ok());
}

TEST(ShardTest, CorruptFilesGiveClearErrors) {
  const std::string dir = TempDir("shard_bad");
  ASSERT_TRUE(WriteShard(dir + "/good.bin", {1, 2, 3, 4}, 2, 256).ok());
  const std::string good = ReadBytes(dir + "/good.bin");
  auto expect_err = [&](const std::string& bytes, const std::string& needle) {
    WriteBytes(dir + "/bad.bin", bytes);
    auto f = TokenFile::OpenShard(dir + "/bad.bin");
    ASSERT_FALSE(f.ok()) << needle;
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("bad.bin"), std::string::npos);
  };
  expect_err(good.substr(0, good.size() - 1), "truncated or corrupt");
  expect_err(good.substr(0, 10), "shorter than the 64-byte shard header");
  std::string b = good;
  b[0] = 'X';
  expect_err(b, "bad magic");
  b = good;
  b[8] = 9;
  expect_err(b, "unsupported shard version 9");
  b = good;
  b[12] = 3;
  expect_err(b, "bytes per token 3");
  auto missing = TokenFile::OpenShard(dir + "/nope.bin");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// Writes a Megatron MMIDIDX dataset with the given documents.
void WriteMegatron(const std::string& prefix, const std::vector<std::vector<uint16_t>>& docs,
                   bool corrupt_pointer = false) {
  std::string idx("MMIDIDX\0\0", 9), bin;
  auto put = [&](auto v) { idx.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint64_t{1});
  put(uint8_t{8});  // uint16
  put(uint64_t{docs.size()});
  put(uint64_t{docs.size() + 1});
  for (const auto& d : docs) put(int32_t(d.size()));
  int64_t off = 0;
  for (const auto& d : docs) {
    put(int64_t(corrupt_pointer ? off + 2 : off));
    off += 2 * d.size();
    bin.append(reinterpret_cast<const char*>(d.data()), 2 * d.size());
  }
  for (size_t i = 0; i <= docs.size(); ++i) put(int64_t(i));
  WriteBytes(prefix + ".idx", idx);
  WriteBytes(prefix + ".bin", bin);
}

TEST(ShardTest, ReadsMegatronIndexedDataset) {
  const std::string dir = TempDir("megatron");
  WriteMegatron(dir + "/ds", {{5, 6, 7}, {8}, {9, 10}});
  auto f = TokenFile::OpenMegatron(dir + "/ds");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ((*f)->num_tokens(), 6);
  std::vector<int32_t> out(6);
  (*f)->Read(0, 6, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 7, 8, 9, 10}));
  WriteMegatron(dir + "/bad", {{5, 6, 7}, {8}}, true);
  auto bad = TokenFile::OpenMegatron(dir + "/bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not contiguous"), std::string::npos);
  WriteBytes(dir + "/junk.idx", "hello world, not an index at all......");
  WriteBytes(dir + "/junk.bin", "");
  EXPECT_NE(TokenFile::OpenMegatron(dir + "/junk").status().message().find("bad magic"), std::string::npos);
}

TEST(ShardTest, PrepareTokenizesBytesWithDocumentSeparators) {
  const std::string dir = TempDir("prepare");
  WriteBytes(dir + "/a.txt", "hello");
  WriteBytes(dir + "/b.txt", "AB");
  auto n = PrepareByteShards({dir + "/a.txt", dir + "/b.txt"}, dir + "/out", 4);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 9);  // "hello" 0 "AB" 0
  std::vector<int32_t> all;
  for (int s = 0; s < 3; ++s) {
    auto f = TokenFile::OpenShard(dir + "/out/shard_0000" + std::to_string(s) + ".bin");
    ASSERT_TRUE(f.ok()) << s;
    std::vector<int32_t> t((*f)->num_tokens());
    (*f)->Read(0, t.size(), t.data());
    all.insert(all.end(), t.begin(), t.end());
  }
  EXPECT_EQ(all, (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o', 0, 'A', 'B', 0}));
  auto missing = PrepareByteShards({dir + "/none.txt"}, dir + "/out2", 4);
  EXPECT_NE(missing.status().message().find("none.txt"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::data
