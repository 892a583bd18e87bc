// SFT samples: the chat formats against the chat templates rendered by
// @lenml/tokenizers (ids pinned in testdata/chat_expected.json by
// tools/chat_template_expected.js), loss masks, the dataset file and packing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/atomic_file.h"
#include "runtime/data/sft/chat.h"
#include "runtime/data/sft/dataset.h"
#include "runtime/data/sft/prepare.h"
#include "runtime/data/tokenizer/testing.h"

namespace hypertrain::data::sft {
namespace {

using json = nlohmann::json;

json Expected() {
  auto text = ReadFileToString("runtime/data/sft/testdata/chat_expected.json");
  EXPECT_TRUE(text.ok());
  return json::parse(*text);
}

std::vector<Message> Messages(const json& c) {
  std::vector<Message> m;
  for (const auto& x : c) m.push_back({x["role"], x["content"]});
  return m;
}

std::string TokenizerOrSkip(const std::string& name) {
  return tokenizer::testing::RealTokenizerDir(name);
}

class ChatParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatParity, RenderAndIdsMatchTheChatTemplate) {
  const std::string name = GetParam();
  const std::string dir = TokenizerOrSkip(name);
  if (dir.empty()) {
    if (std::getenv("CI") != nullptr) FAIL() << "tokenizer " << name << " missing (tools/setup.sh)";
    GTEST_SKIP() << "tokenizer " << name << " missing: run tools/setup.sh";
  }
  auto tok = *tokenizer::Tokenizer::FromDir(dir);
  const json e = Expected();
  const ChatFormat f = *ParseChatFormat(name);
  const std::string bos = *tok->IdToToken(*tok->bos_id()), eos = *tok->IdToToken(*tok->eos_id());
  const json& cases = e["formats"][name];
  ASSERT_EQ(cases.size(), e["conversations"].size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto msgs = Messages(e["conversations"][k]);
    EXPECT_EQ(*RenderForGeneration(f, msgs, bos, eos), cases[k]["text"].get<std::string>()) << k;
    const std::vector<int32_t> want = cases[k]["ids"].get<std::vector<int32_t>>();
    auto segs = *Render(f, msgs, bos, eos);
    Sample s = *Tokenize(*tok, segs);
    // The template's trailing generation prompt (llama3) is not trained on.
    std::vector<int32_t> expect = want;
    if (f == ChatFormat::kLlama3) expect.resize(want.size() - 4);
    ASSERT_EQ(s.ids, expect) << "conversation " << k;
    // The loss covers exactly the assistant turns and their end-of-turn token.
    std::string target_text;
    std::vector<int32_t> run;
    std::vector<std::string> decoded;
    for (size_t i = 0; i <= s.ids.size(); ++i) {
      if (i < s.ids.size() && s.target[i]) {
        run.push_back(s.ids[i]);
      } else if (!run.empty()) {
        decoded.push_back(*tok->Decode(run));
        run.clear();
      }
    }
    std::vector<std::string> assistant;
    for (const Message& m : msgs) {
      if (m.role != "assistant") continue;
      assistant.push_back(f == ChatFormat::kLlama3 ? PyStrip(m.content) + "<|eot_id|>"
                                                   : PyStrip(m.content) + " " + eos);
    }
    ASSERT_EQ(decoded.size(), assistant.size()) << k;
    for (size_t i = 0; i < assistant.size(); ++i) {
      // Llama-2's decoder drops the leading space of the first piece.
      std::string d = decoded[i];
      if (!d.empty() && d[0] == ' ') d.erase(0, 1);
      EXPECT_EQ(d, assistant[i]) << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Llama, ChatParity, ::testing::Values("llama3", "llama2"));

TEST(SftTest, MessagesFromJsonAndErrors) {
  auto pc = MessagesFromJson(json::parse(R"({"prompt": "p", "completion": "c"})"));
  ASSERT_TRUE(pc.ok());
  EXPECT_EQ((*pc)[0].role, "user");
  EXPECT_EQ((*pc)[1].content, "c");
  EXPECT_NE(MessagesFromJson(json::parse(R"({"text": "x"})")).status().message().find("\"messages\""),
            std::string::npos);
  EXPECT_NE(MessagesFromJson(json::parse(R"({"messages": [{"role": "bot", "content": "x"}]})"))
                .status().message().find("'bot'"),
            std::string::npos);
  EXPECT_NE(MessagesFromJson(json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"))
                .status().message().find("no assistant"),
            std::string::npos);
  std::vector<Message> bad = {{"user", "a"}, {"user", "b"}, {"assistant", "c"}};
  EXPECT_NE(Render(ChatFormat::kLlama2, bad, "<s>", "</s>").status().message().find("alternate"),
            std::string::npos);
  EXPECT_EQ(PyStrip("\u3000 x y\t\n\u00a0"), "x y");
  EXPECT_EQ(PyStrip(" \xc3\xa9 "), "\xc3\xa9");
}

Sample Make(std::vector<int32_t> ids, std::vector<uint8_t> t) { return {std::move(ids), std::move(t)}; }

TEST(SftTest, DatasetRoundTripAndBestFitPacking) {
  const std::string dir = ::testing::TempDir() + "/sft_ds";
  (void)RemoveTree(dir);
  std::vector<Sample> samples = {
      Make({1, 2, 3, 4, 5, 6}, {0, 0, 0, 1, 1, 1}),  // 5 positions
      Make({7, 8, 9}, {0, 1, 1}),                    // 2
      Make({1, 9, 9, 9}, {0, 0, 1, 1}),              // 3
      Make({5}, {1}),                                // too short: skipped
      Make({2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3}, {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}),  // 10 -> truncated
  };
  ASSERT_TRUE(WriteDataset(dir, samples, 10, json::object()).ok());
  ASSERT_TRUE(IsSftDataset(dir));
  auto d = Dataset::Open(dir);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->num_samples(), 5);
  EXPECT_EQ((*d)->length(4), 11);
  EXPECT_EQ((*d)->manifest()["target_tokens"], 3 + 2 + 2 + 1 + 10);
  const PackPlan p = PackBestFit(**d, 8);
  EXPECT_EQ(p.truncated, 1);
  EXPECT_EQ(p.skipped, 1);
  // 8 (truncated) | 5 + 3 | 2  -> three rows, every sample once.
  ASSERT_EQ(p.rows.size(), 3u);
  std::multiset<int64_t> seen;
  for (const auto& r : p.rows) seen.insert(r.begin(), r.end());
  EXPECT_EQ(seen, (std::multiset<int64_t>{0, 1, 2, 4}));
  EXPECT_EQ(p.used_positions, 8 + 5 + 3 + 2);
  // Row holding samples 0 and 2: inputs/targets/positions.
  const std::vector<int64_t>* row = nullptr;
  for (const auto& r : p.rows)
    if (r.size() == 2) row = &r;
  ASSERT_NE(row, nullptr);
  std::vector<int32_t> in(8), tg(8), pos(8);
  FillRow(**d, {0, 2}, 8, -100, in.data(), tg.data(), pos.data());
  EXPECT_EQ(in, (std::vector<int32_t>{1, 2, 3, 4, 5, 1, 9, 9}));
  EXPECT_EQ(tg, (std::vector<int32_t>{-100, -100, 4, 5, 6, -100, 9, 9}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  FillRow(**d, {1}, 8, -100, in.data(), tg.data(), pos.data());
  EXPECT_EQ(tg, (std::vector<int32_t>{8, 9, -100, -100, -100, -100, -100, -100}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 0, 1, 2, 3, 4, 5}));
  // Corruption is named.
  {
    std::ofstream f(dir + "/samples.bin", std::ios::app | std::ios::binary);
    f << "x";
  }
  EXPECT_NE(Dataset::Open(dir).status().message().find("does not match"), std::string::npos);
}

TEST(SftTest, PrepareWritesADatasetAndNamesBadLines) {
  const std::string dir = TokenizerOrSkip("llama3");
  if (dir.empty()) GTEST_SKIP() << "no llama3 tokenizer (tools/setup.sh)";
  const std::string root = ::testing::TempDir() + "/sft_prep";
  (void)RemoveTree(root);
  ASSERT_TRUE(MakeDirs(root).ok());
  ASSERT_TRUE(WriteFileAtomically(root + "/a.jsonl",
                                  R"({"prompt": "Hi", "completion": "Hello!"})"
                                  "\n\n"
                                  R"({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]})"
                                  "\n")
                  .ok());
  PrepareOptions o;
  o.inputs = {root + "/a.jsonl"};
  o.out_dir = root + "/out";
  o.tokenizer_dir = dir;
  auto m = Prepare(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)["samples"], 2);
  EXPECT_EQ((*m)["chat_format"], "llama3");
  auto d = Dataset::Open(root + "/out");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->tokens(0)[0], 128000u);  // BOS, not in the loss
  auto again = Prepare(o);
  EXPECT_NE(again.status().message().find("not empty"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(root + "/b.jsonl", "{\"prompt\": \"x\"}\n").ok());
  o.inputs = {root + "/b.jsonl"};
  o.overwrite = true;
  auto bad = Prepare(o);
  ASSERT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("b.jsonl:1:"), std::string::npos) << bad.status().ToString();
  EXPECT_TRUE(Dataset::Open(root + "/out").ok());  // the old data is still there
}

}  // namespace
}  // namespace hypertrain::data::sft
