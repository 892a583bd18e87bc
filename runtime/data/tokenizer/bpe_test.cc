// The BPE merge loop against a naive reference (repeatedly merge the leftmost
// pair of lowest rank), on random words long and short, and the model's
// options: ignore_merges, byte fallback, unk fusing, bad merges.
#include <gtest/gtest.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <random>

#include "runtime/data/tokenizer/bpe.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

// Leftmost lowest-rank merge, on strings, until none applies.
std::vector<std::string> ReferenceBpe(const std::string& word, const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> s;
  for (char c : word) s.emplace_back(1, c);
  while (s.size() > 1) {
    int best = -1, best_rank = INT_MAX;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      auto it = ranks.find({s[i], s[i + 1]});
      if (it != ranks.end() && it->second < best_rank) best_rank = it->second, best = static_cast<int>(i);
    }
    if (best < 0) break;
    s[best] += s[best + 1];
    s.erase(s.begin() + best + 1);
  }
  return s;
}

TEST(Bpe, MergesLikeTheReferenceOnRandomWords) {
  std::mt19937 rng(21);
  // Vocab: a..d plus merged tokens grown from random pairs of existing ones.
  std::vector<std::string> tokens = {"a", "b", "c", "d"};
  std::map<std::pair<std::string, std::string>, int> ranks;
  json merges = json::array();
  while (merges.size() < 60) {
    const std::string& x = tokens[rng() % tokens.size()];
    const std::string& y = tokens[rng() % tokens.size()];
    if (x.size() + y.size() > 6 || ranks.count({x, y})) continue;
    const std::string xy = x + y;
    ranks[{x, y}] = static_cast<int>(merges.size());
    merges.push_back(x + " " + y);
    if (std::find(tokens.begin(), tokens.end(), xy) == tokens.end()) tokens.push_back(xy);
  }
  json vocab = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int>(i);
  auto model = BpeModel::FromJson({{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}, false);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (int trial = 0; trial < 400; ++trial) {
    const size_t len = 1 + rng() % (trial % 2 ? 120 : 12);  // both the short and the long path
    std::string word;
    for (size_t i = 0; i < len; ++i) word.push_back("abcd"[rng() % 4]);
    std::vector<int32_t> ids;
    (*model)->Encode(word, &ids);
    std::vector<std::string> got;
    for (int32_t id : ids) got.push_back((*model)->IdToToken(id));
    ASSERT_EQ(got, ReferenceBpe(word, ranks)) << word;
    std::vector<int32_t> again;  // second time from the per-thread cache
    (*model)->Encode(word, &again);
    ASSERT_EQ(again, ids);
  }
}

TEST(Bpe, ByteLevelVocabIsMatchedOnRawBytes) {
  // "Ġ" is the alphabet's space: the model sees raw " a".
  json vocab = {{"\xC4\xA0", 0}, {"a", 1}, {"\xC4\xA0" "a", 2}};
  auto model = BpeModel::FromJson({{"vocab", vocab}, {"merges", {"\xC4\xA0 a"}}}, true);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<int32_t> ids;
  (*model)->Encode(" a", &ids);
  EXPECT_EQ(ids, std::vector<int32_t>{2});
  EXPECT_EQ((*model)->TokenToId("\xC4\xA0" "a"), 2);
}

TEST(Bpe, IgnoreMergesTakesWholeVocabWords) {
  // "abc" is in the vocab but no merge makes it from a, b, c.
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}};
  json model = {{"vocab", vocab}, {"merges", {"a b"}}};
  auto plain = BpeModel::FromJson(model, false);
  ASSERT_TRUE(plain.ok());
  std::vector<int32_t> ids;
  (*plain)->Encode("abc", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  model["ignore_merges"] = true;
  auto ignoring = BpeModel::FromJson(model, false);
  ASSERT_TRUE(ignoring.ok());
  ids.clear();
  (*ignoring)->Encode("abc", &ids);
  EXPECT_EQ(ids, std::vector<int32_t>{4});
}

TEST(Bpe, ByteFallbackThenFusedUnk) {
  json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xED>", 2}, {"<0x95>", 3}, {"<0x9C>", 4}};
  json model = {{"vocab", vocab}, {"merges", json::array()}, {"unk_token", "<unk>"}, {"byte_fallback", true}};
  auto m = BpeModel::FromJson(model, false);
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> ids;
  (*m)->Encode("a\xED\x95\x9C" "a", &ids);  // "a한a": 한 has its three byte tokens
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 4, 1}));
  ids.clear();
  (*m)->Encode("a\xC3\xA9\xC3\xA9" "a", &ids);  // "aééa": bytes missing -> unk, fused
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 0, 1}));
  model["fuse_unk"] = true;
  auto fused = BpeModel::FromJson(model, false);
  ASSERT_TRUE(fused.ok());
  ids.clear();
  (*fused)->Encode("a\xC3\xA9\xC3\xA9" "a", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 1}));
}

TEST(Bpe, BadModelsAreClearErrors) {
  json vocab = {{"a", 0}, {"b", 1}};
  auto missing = BpeModel::FromJson({{"vocab", vocab}, {"merges", {"a b"}}}, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("makes 'ab', which is not in the vocab"), std::string::npos)
      << missing.status().message();
  auto malformed = BpeModel::FromJson({{"vocab", vocab}, {"merges", {"ab"}}}, false);
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("merge 0 'ab'"), std::string::npos);
  auto novocab = BpeModel::FromJson({{"merges", json::array()}}, false);
  EXPECT_FALSE(novocab.ok());
}

TEST(Bpe, MetaspaceSplittableOnlyWithoutInnerMetaspace) {
  json ok_vocab = {{"\xE2\x96\x81", 0}, {"a", 1}, {"\xE2\x96\x81" "a", 2}, {"\xE2\x96\x81\xE2\x96\x81", 3}};
  auto ok = BpeModel::FromJson({{"vocab", ok_vocab}, {"merges", json::array()}}, false);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE((*ok)->metaspace_splittable());
  json bad_vocab = ok_vocab;
  bad_vocab["a\xE2\x96\x81"] = 4;
  auto bad = BpeModel::FromJson({{"vocab", bad_vocab}, {"merges", json::array()}}, false);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE((*bad)->metaspace_splittable());
}

}  // namespace
}  // namespace hypertrain::tokenizer
