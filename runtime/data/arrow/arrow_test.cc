#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/data/arrow/arrow_stream.h"
#include "runtime/data/arrow/hf_dataset.h"
#include "runtime/data/tokenizer/testing.h"

namespace hypertrain::data::arrow {
namespace {

using nlohmann::json;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Writes the datasets with apache-arrow (node) once per test binary.
class ArrowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HT_REQUIRE_NPM_MODULE(modules, "apache-arrow");
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/ds";
    if (!std::filesystem::exists(dir_ + "/expected.json")) {
      const std::string cmd = "NODE_PATH='" + modules + "' node runtime/data/arrow/testdata/make_hf_datasets.js '" +
                              dir_ + "' > /dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    expected_ = json::parse(Slurp(dir_ + "/expected.json"));
  }
  std::string dir_;
  json expected_;
};

TEST_F(ArrowTest, ReadsTextColumnsAcrossFilesAndBatches) {
  auto files = HfDatasetArrowFiles(dir_ + "/text_ds");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 2u);
  json got = json::array();
  int batches = 0;
  for (const std::string& f : *files) {
    auto r = ArrowStreamReader::Open(f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const int text = (*r)->FieldIndex("text");
    ASSERT_EQ(text, 1);
    EXPECT_EQ((*r)->fields()[0].type.ToString(), "int64");
    while (true) {
      auto more = (*r)->NextBatch();
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      if (!*more) break;
      ++batches;
      auto col = (*r)->Strings(text);
      ASSERT_TRUE(col.ok()) << col.status().ToString();
      for (int64_t i = 0; i < col->rows; ++i) {
        auto s = col->Get(i);
        got.push_back(s ? json(std::string(*s)) : json(nullptr));
      }
    }
    EXPECT_EQ((*r)->position(), (*r)->file_bytes());
  }
  EXPECT_EQ(batches, 3);
  EXPECT_EQ(got, expected_["text_ds"]);
}

TEST_F(ArrowTest, ReadsPreTokenizedIds) {
  auto files = HfDatasetArrowFiles(dir_ + "/tok_ds");
  ASSERT_TRUE(files.ok());
  auto r = ArrowStreamReader::Open(files->at(0));
  ASSERT_TRUE(r.ok());
  const int ids = (*r)->FieldIndex("input_ids");
  ASSERT_EQ(ids, 0);
  EXPECT_EQ((*r)->fields()[ids].type.ToString(), "list<int32>");
  json got = json::array();
  while (*(*r)->NextBatch()) {
    auto col = (*r)->IntLists(ids);
    ASSERT_TRUE(col.ok()) << col.status().ToString();
    for (int64_t i = 0; i < col->rows; ++i) {
      int64_t b, e;
      col->Range(i, &b, &e);
      json row = json::array();
      for (int64_t k = b; k < e; ++k) row.push_back(col->Value(k));
      got.push_back(row);
    }
    // attention_mask (list<int8>) reads too; text does not exist.
    auto mask = (*r)->IntLists((*r)->FieldIndex("attention_mask"));
    ASSERT_TRUE(mask.ok()) << mask.status().ToString();
    EXPECT_EQ(mask->value_bytes, 1);
  }
  EXPECT_EQ(got, expected_["tok_ds"]);
  EXPECT_FALSE((*r)->Strings(ids).ok());  // not a string column
}

TEST_F(ArrowTest, DatasetDictSplits) {
  auto train = HfDatasetArrowFiles(dir_ + "/dict_ds");
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_NE(train->at(0).find("/train/"), std::string::npos);
  auto test = HfDatasetArrowFiles(dir_ + "/dict_ds", "test");
  ASSERT_TRUE(test.ok());
  auto missing = HfDatasetArrowFiles(dir_ + "/dict_ds", "validation");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("splits: train, test"), std::string::npos) << missing.status().message();
  auto not_ds = HfDatasetArrowFiles(std::getenv("TEST_TMPDIR"));
  ASSERT_FALSE(not_ds.ok());
  EXPECT_NE(not_ds.status().message().find("save_to_disk"), std::string::npos);
  EXPECT_TRUE(IsHfDatasetDir(dir_ + "/dict_ds"));
}

TEST_F(ArrowTest, CorruptFilesAreClearErrors) {
  const std::string good = Slurp(dir_ + "/text_ds/data-00000-of-00002.arrow");
  const std::string tmp = std::string(std::getenv("TEST_TMPDIR"));
  {
    std::ofstream(tmp + "/truncated.arrow", std::ios::binary) << good.substr(0, good.size() - 40);
    auto r = ArrowStreamReader::Open(tmp + "/truncated.arrow");
    ASSERT_TRUE(r.ok());  // the schema is intact
    Status last;
    for (int i = 0; i < 5; ++i) {
      auto more = (*r)->NextBatch();
      if (!more.ok()) {
        last = more.status();
        break;
      }
    }
    ASSERT_FALSE(last.ok()) << "truncation not detected";
    EXPECT_EQ(last.code(), StatusCode::kDataLoss);
    EXPECT_NE(last.message().find("truncated.arrow"), std::string::npos);
  }
  {
    std::ofstream(tmp + "/text.arrow", std::ios::binary) << "just some text, not arrow at all";
    auto r = ArrowStreamReader::Open(tmp + "/text.arrow");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  {
    std::ofstream(tmp + "/empty.arrow", std::ios::binary);
    EXPECT_FALSE(ArrowStreamReader::Open(tmp + "/empty.arrow").ok());
  }
  EXPECT_EQ(ArrowStreamReader::Open(tmp + "/absent.arrow").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hypertrain::data::arrow
