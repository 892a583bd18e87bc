// The ids of HF tokenizers, exactly, for the real Llama-3 and Llama-2
// tokenizer.json on a mixed corpus (English prose, code, whitespace runs and
// newlines, digits, emoji, accented Latin, CJK, Korean, special tokens in the
// text). Expected ids: testdata/expected_<name>.json, made once by
// tools/tokenizer_expected.js with @lenml/tokenizers.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "runtime/data/tokenizer/testing.h"
#include "runtime/data/tokenizer/tokenizer.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

std::string Show(const std::string& s) { return json(s).dump(); }

class ParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParityTest, IdsAndDecodeMatchHuggingFace) {
  const std::string name = GetParam();
  HT_REQUIRE_REAL_TOKENIZER(dir, name);
  const json corpus = ReadJson("runtime/data/tokenizer/testdata/corpus.json");
  const json expected = ReadJson("runtime/data/tokenizer/testdata/expected_" + name + ".json");
  auto tok = Tokenizer::FromDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ASSERT_EQ((*tok)->sha256(), expected["tokenizer_json_sha256"].get<std::string>())
      << dir << "/tokenizer.json is not the file the expected ids were made with ("
      << expected["package"].get<std::string>() << "); rerun tools/setup.sh";
  ASSERT_EQ(corpus.size(), expected["cases"].size());
  int checked = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const json& want = expected["cases"][i];
    auto ids = (*tok)->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, want["ids"].get<std::vector<int32_t>>()) << "case " << i << ": " << Show(text);
    auto plain = (*tok)->Encode(text, {.add_special = false});
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(*plain, want["ids_no_special"].get<std::vector<int32_t>>()) << "case " << i << ": " << Show(text);
    auto decoded = (*tok)->Decode(*plain);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, want["decoded"].get<std::string>()) << "case " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 38);
}

TEST_P(ParityTest, ThreadsAgreeWithOneThread) {
  const std::string name = GetParam();
  HT_REQUIRE_REAL_TOKENIZER(dir, name);
  const json corpus = ReadJson("runtime/data/tokenizer/testdata/corpus.json");
  auto tok = Tokenizer::FromDir(dir);
  ASSERT_TRUE(tok.ok());
  std::string all;
  for (const auto& c : corpus) all += c.get<std::string>() + "\n";
  const auto want = (*tok)->Encode(all);
  ASSERT_TRUE(want.ok());
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) got[t] = *(*tok)->Encode(all);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, *want);
}

TEST_P(ParityTest, DescribesSpecialTokens) {
  const std::string name = GetParam();
  HT_REQUIRE_REAL_TOKENIZER(dir, name);
  auto tok = Tokenizer::FromDir(dir);
  ASSERT_TRUE(tok.ok());
  const Tokenizer& t = **tok;
  if (name == "llama3") {
    EXPECT_EQ(t.vocab_size(), 128256);
    EXPECT_EQ(t.bos_id(), 128000);
    EXPECT_EQ(t.eos_id(), 128001);
    EXPECT_EQ(t.TokenToId("<|eot_id|>"), 128009);
    EXPECT_FALSE(t.add_bos());  // this tokenizer.json's post-processor adds none
  } else {
    EXPECT_EQ(t.vocab_size(), 32000);
    EXPECT_EQ(t.bos_id(), 1);
    EXPECT_EQ(t.eos_id(), 2);
    EXPECT_TRUE(t.add_bos());
    EXPECT_FALSE(t.add_eos());
  }
  EXPECT_TRUE(t.IsSpecial(*t.eos_id()));
  EXPECT_EQ(t.IdToToken(*t.eos_id()), t.eos_token());
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, ParityTest, ::testing::Values("llama3", "llama2"));

}  // namespace
}  // namespace hypertrain::tokenizer
