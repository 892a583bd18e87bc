#include "runtime/ckpt/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/st_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // A raw file from a header object and a buffer.
  std::string Raw(const std::string& name, const std::string& header, const std::string& buffer) {
    std::string s(8, '\0');
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    s += header + buffer;
    const std::string p = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(p, s).ok());
    return p;
  }
  std::string dir_;
};

std::vector<float> Values(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(i * 0.37f) * (1.0f + i) + 1e-3f * i;
  return v;
}

TEST_F(SafetensorsTest, WriterFollowsTheSpecAndRoundTrips) {
  const auto a = Values(6), b = Values(5);
  std::vector<StTensorOut> ts = {
      {"a", {2, 3}, [&](float* d) { std::copy(a.begin(), a.end(), d); return Status::Ok(); }},
      {"b.weight", {5}, [&](float* d) { std::copy(b.begin(), b.end(), d); return Status::Ok(); }},
  };
  for (StDType dt : {StDType::kF32, StDType::kBF16}) {
    const std::string p = dir_ + "/m.safetensors";
    ASSERT_TRUE(WriteSafetensors(p, dt, ts, {{"format", "pt"}}).ok());
    // Parse the bytes by hand, per the spec.
    std::string raw = *ReadFileToString(p);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
    EXPECT_EQ(n % 8, 0u);
    json h = json::parse(raw.substr(8, n));
    EXPECT_EQ(h["__metadata__"]["format"], "pt");
    const int es = dt == StDType::kF32 ? 4 : 2;
    EXPECT_EQ(h["a"]["dtype"], dt == StDType::kF32 ? "F32" : "BF16");
    EXPECT_EQ(h["a"]["shape"], json({2, 3}));
    EXPECT_EQ(h["a"]["data_offsets"], json({0, 6 * es}));
    EXPECT_EQ(h["b.weight"]["data_offsets"], json({6 * es, 11 * es}));
    EXPECT_EQ(raw.size(), 8 + n + 11 * es);
    if (dt == StDType::kF32) {
      float f;
      std::memcpy(&f, raw.data() + 8 + n + 4, 4);
      EXPECT_EQ(f, a[1]);
    }
    auto r = SafetensorsReader::Open(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->metadata().at("format"), "pt");
    std::vector<float> got(5);
    ASSERT_TRUE(r->ReadF32(*r->Find("b.weight"), 0, 5, got.data()).ok());
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(got[i], dt == StDType::kF32 ? b[i] : Bf16ToFloat(FloatToBf16(b[i])));
      EXPECT_LE(std::fabs(got[i] - b[i]), std::fabs(b[i]) / 256.0f);
    }
    std::vector<float> part(2);
    ASSERT_TRUE(r->ReadF32(*r->Find("a"), 3, 2, part.data()).ok());
    EXPECT_EQ(part[0], dt == StDType::kF32 ? a[3] : Bf16ToFloat(FloatToBf16(a[3])));
  }
}

TEST_F(SafetensorsTest, ConversionsRoundToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  uint32_t u = 0x3F808000u;  // exactly half way between two bf16 values, even below
  float f;
  std::memcpy(&f, &u, 4);
  EXPECT_EQ(FloatToBf16(f), 0x3F80);
  u = 0x3F818000u;  // half way, odd below: rounds up
  std::memcpy(&f, &u, 4);
  EXPECT_EQ(FloatToBf16(f), 0x3F82);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  EXPECT_EQ(F16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(F16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));
}

TEST_F(SafetensorsTest, ReadsF16AndRejectsMalformedFilesClearly) {
  // F16 [2]: 1.0, -2.0
  std::string buf("\x00\x3C\x00\xC0", 4);
  auto ok = SafetensorsReader::Open(Raw("f16", R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", buf));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  float v[2];
  ASSERT_TRUE(ok->ReadF32(ok->tensors()[0], 0, 2, v).ok());
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);

  struct Case {
    std::string header, buffer, expect;
  };
  const std::vector<Case> cases = {
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0'), "truncated"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, '\0'), "trailing bytes"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0'), "shape and dtype need 8"},
      {R"({"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'), "I64 is not supported"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0'), "(gap)"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       std::string(8, '\0'), "(overlap)"},
      {R"({"x":{"dtype":"F32","shape":[1]}})", std::string(4, '\0'), "lacks dtype, shape or data_offsets"},
      {R"([1,2])", "", "not a JSON object"},
      {R"({"__metadata__":{"a":1}})", "", "is not a string"},
  };
  int i = 0;
  for (const Case& c : cases) {
    auto r = SafetensorsReader::Open(Raw("bad" + std::to_string(i++), c.header, c.buffer));
    ASSERT_FALSE(r.ok()) << c.header;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(dir_), std::string::npos);
  }
  // Header length past the end of the file.
  std::string s(8, '\0');
  s[0] = 100;
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/short", s + "{}").ok());
  EXPECT_NE(SafetensorsReader::Open(dir_ + "/short").status().message().find("runs past the end"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::ckpt
