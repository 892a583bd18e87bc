#include "runtime/train/tensorboard.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/train/metrics.h"

namespace hypertrain::train {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  auto p = std::filesystem::path(base ? base : "/tmp") / name;
  std::filesystem::remove_all(p);
  return p.string();
}

TEST(MaskedCrc32cTest, KnownVectors) {
  // crc 0xE3069283 of the CRC-32C check string, rotated right by 15, plus
  // TFRecord's 0xa282ead8.
  EXPECT_EQ(MaskedCrc32c("123456789", 9), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
  EXPECT_EQ(MaskedCrc32c("", 0), 0xa282ead8u);
}

TEST(TensorBoardTest, WrittenEventsParseBack) {
  const std::string dir = TempDir("tb");
  std::string path;
  {
    auto w = TfEventsWriter::Create(dir);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    path = (*w)->path();
    ASSERT_TRUE((*w)->AddScalars(1, 100.5, {{"train/loss", 5.5}, {"train/lr", 1e-3}}).ok());
    ASSERT_TRUE((*w)->AddScalars(300, 101.5, {{"train/loss", 2.25}}).ok());
  }
  EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos);
  auto f = ReadTfEvents(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->file_version, "brain.Event:2");
  ASSERT_EQ(f->scalars.size(), 3u);
  EXPECT_EQ(f->scalars[0].tag, "train/loss");
  EXPECT_EQ(f->scalars[0].step, 1);
  EXPECT_EQ(f->scalars[0].value, 5.5f);
  EXPECT_EQ(f->scalars[0].wall_time, 100.5);
  EXPECT_FLOAT_EQ(f->scalars[1].value, 1e-3f);
  EXPECT_EQ(f->scalars[2].step, 300);  // multi-byte varint
  EXPECT_EQ(f->scalars[2].value, 2.25f);

  // A flipped byte is caught by the CRC.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 10] ^= 0x40;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto bad = ReadTfEvents(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("crc mismatch"), std::string::npos);
}

TEST(MetricsTest, JsonlAndTensorBoardAndLogLine) {
  const std::string dir = TempDir("metrics");
  auto w = MetricsWriter::Create(dir);
  ASSERT_TRUE(w.ok());
  StepMetrics m;
  m.step = 10;
  m.max_steps = 20;
  m.loss = 3.5;
  m.lr = 1e-3;
  m.grad_norm = std::nan("");
  m.tokens_per_s = 12345;
  m.eta_s = 65;
  ASSERT_TRUE((*w)->Write(m).ok());
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["step"], 10);
  EXPECT_EQ(j["loss"], 3.5);
  EXPECT_TRUE(j["grad_norm"].is_null());
  auto tb = ReadTfEvents((*w)->tensorboard_path());
  ASSERT_TRUE(tb.ok());
  EXPECT_GE(tb->scalars.size(), 5u);
  const std::string s = FormatStepLine(m);
  EXPECT_NE(s.find("step 10/20"), std::string::npos) << s;
  EXPECT_NE(s.find("12.3k tok/s"), std::string::npos) << s;
  EXPECT_NE(s.find("ETA 00:01:05"), std::string::npos) << s;
  EXPECT_NE(s.find("MFU n/a"), std::string::npos) << s;
}

}  // namespace
}  // namespace hypertrain::train
