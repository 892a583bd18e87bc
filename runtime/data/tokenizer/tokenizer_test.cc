// The tokenizer pipeline on small hand-made tokenizer.json files: added
// tokens, normalizers, pre-tokenizers, post-processor, decoders, config, and
// the errors for what it cannot run.
#include "runtime/data/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer/byte_level.h"

namespace hypertrain::tokenizer {
namespace {

using nlohmann::json;

// A byte-level tokenizer: all 256 bytes, merges for "he", "ll", "hell",
// "hello", " w"; Split on a GPT-2-like regex; three added tokens.
json ByteLevelJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[EncodeByteLevel(std::string(1, static_cast<char>(b)))] = b;
  const std::vector<std::string> merged = {"he", "ll", "hell", "hello", " w"};
  json merges = {"h e", "l l", "he ll", "hell o", EncodeByteLevel(" ") + " w"};
  for (size_t i = 0; i < merged.size(); ++i) vocab[EncodeByteLevel(merged[i])] = 256 + static_cast<int>(i);
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"added_tokens",
       {{{"id", 300}, {"content", "<|a|>"}, {"special", true}},
        {{"id", 301}, {"content", "<|ab|>"}, {"special", true}},
        {{"id", 302}, {"content", "<x>"}, {"special", false}, {"lstrip", true}, {"rstrip", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", " ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+"}}},
           {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|a|>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
        {"special_tokens", {{"<|a|>", {{"id", "<|a|>"}, {"ids", {300}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
  };
}

std::unique_ptr<Tokenizer> Load(const json& j, const json& config = json::object()) {
  auto t = Tokenizer::FromJson(j.dump(), config.dump(), "test.json");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> Ids(const Tokenizer& t, std::string_view text, EncodeOptions o = {.add_special = false}) {
  auto ids = t.Encode(text, o);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(Tokenizer, ByteLevelPipelineAndTemplate) {
  auto t = Load(ByteLevelJson(), {{"bos_token", "<|a|>"}, {"eos_token", {{"content", "<|ab|>"}}}});
  ASSERT_TRUE(t);
  EXPECT_EQ(Ids(*t, "hello world"), (std::vector<int32_t>{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(Ids(*t, "hello", {}), (std::vector<int32_t>{300, 259}));  // template adds <|a|>
  EXPECT_EQ(t->bos_id(), 300);
  EXPECT_EQ(t->eos_id(), 301);
  EXPECT_TRUE(t->add_bos());   // from the template
  EXPECT_FALSE(t->add_eos());
  EXPECT_EQ(t->vocab_size(), 303);
  EXPECT_EQ(*t->Decode(Ids(*t, "hello world 42\n")), "hello world 42\n");
}

TEST(Tokenizer, AddedTokensLeftmostLongestWithStrip) {
  auto t = Load(ByteLevelJson());
  ASSERT_TRUE(t);
  EXPECT_EQ(Ids(*t, "<|ab|><|a|>"), (std::vector<int32_t>{301, 300}));
  // <x> swallows the spaces on both sides.
  EXPECT_EQ(Ids(*t, "he  <x>  he"), (std::vector<int32_t>{256, 302, 256}));
  // Not parsed: plain text.
  auto plain = Ids(*t, "<|a|>", {.add_special = false, .parse_special = false});
  EXPECT_EQ(plain.size(), 5u);
  EXPECT_EQ(*t->Decode(plain), "<|a|>");
  EXPECT_TRUE(t->IsSpecial(300));
  EXPECT_FALSE(t->IsSpecial(302));
  EXPECT_EQ(*t->Decode(std::vector<int32_t>{300, 256}, {.skip_special = true}), "he");
}

TEST(Tokenizer, InvalidUtf8IsReadAsReplacementCharacters) {
  auto t = Load(ByteLevelJson());
  ASSERT_TRUE(t);
  EXPECT_EQ(Ids(*t, "h\xFFh"), (std::vector<int32_t>{'h', 0xEF, 0xBF, 0xBD, 'h'}));
}

TEST(Tokenizer, DecodeRejectsUnknownIds) {
  auto t = Load(ByteLevelJson());
  ASSERT_TRUE(t);
  auto bad = t->Decode(std::vector<int32_t>{5, 303});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("303"), std::string::npos);
  EXPECT_FALSE(t->Decode(std::vector<int32_t>{-1}).ok());
}

// SentencePiece-style: Prepend + Replace normalizers, byte fallback, the
// decoder chain of Llama-2.
json SentencePieceJson() {
  const std::string m = "\xE2\x96\x81";  // ▁
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {m, 3}, {"a", 4}, {"b", 5}, {m + "a", 6}, {m + "b", 7},
                {m + m, 8}, {"<0xE2>", 9}, {"<0x82>", 10}, {"<0xAC>", 11}};
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {m + " a", m + " b", m + " " + m}},
                 {"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", true}}},
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", m}},
                                                             {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", m}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}}}}},
      {"decoder", {{"type", "Sequence"},
                   {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
                                 {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                 {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
  };
}

TEST(Tokenizer, SentencePieceStyle) {
  auto t = Load(SentencePieceJson(), {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_eos_token", true}});
  ASSERT_TRUE(t);
  EXPECT_EQ(Ids(*t, "a b", {}), (std::vector<int32_t>{1, 6, 7}));
  EXPECT_EQ(Ids(*t, "a  b"), (std::vector<int32_t>{6, 3, 7}));
  EXPECT_EQ(Ids(*t, "a\xE2\x82\xAC"), (std::vector<int32_t>{6, 9, 10, 11}));  // € by bytes
  EXPECT_EQ(Ids(*t, "a\xC3\xA9\xC3\xA9"), (std::vector<int32_t>{6, 0}));      // ée: unk, fused
  // Each segment between added tokens gets its own "▁".
  EXPECT_EQ(Ids(*t, "a</s>b"), (std::vector<int32_t>{6, 2, 7}));
  EXPECT_EQ(*t->Decode(Ids(*t, "a b\xE2\x82\xAC")), "a b\xE2\x82\xAC");
  EXPECT_TRUE(t->add_bos());
  EXPECT_TRUE(t->add_eos());  // tokenizer_config.json's add_eos_token wins
}

TEST(Tokenizer, MetaspacePreTokenizerPrependsPerScheme) {
  json j = SentencePieceJson();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", false}};
  auto first = Load(j);
  ASSERT_TRUE(first);
  EXPECT_EQ(Ids(*first, "a</s>b"), (std::vector<int32_t>{6, 2, 5}));  // no ▁ after </s>
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  auto always = Load(j);
  ASSERT_TRUE(always);
  EXPECT_EQ(Ids(*always, "a</s>b"), (std::vector<int32_t>{6, 2, 7}));
}

TEST(Tokenizer, UnsupportedTypesAreNamed) {
  struct Case {
    std::string path, type, expect;
  };
  for (const Case& c : std::vector<Case>{{"model", "WordPiece", "model type 'WordPiece' is not supported"},
                                         {"model", "Unigram", "model type 'Unigram' is not supported"},
                                         {"normalizer", "NFKC", "normalizer type 'NFKC' is not supported"},
                                         {"pre_tokenizer", "BertPreTokenizer", "pre-tokenizer type 'BertPreTokenizer'"},
                                         {"post_processor", "Custom", "post-processor type 'Custom'"}}) {
    json j = ByteLevelJson();
    if (c.path == "model") j["model"]["type"] = c.type;
    else j[c.path] = {{"type", c.type}};
    auto t = Tokenizer::FromJson(j.dump(), "", "tok.json");
    ASSERT_FALSE(t.ok()) << c.type;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("tok.json"), std::string::npos);
  }
  // An unsupported decoder only stops Decode.
  json j = ByteLevelJson();
  j["decoder"] = {{"type", "CTC"}};
  auto t = Load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(Ids(*t, "he"), std::vector<int32_t>{256});
  auto d = t->Decode(std::vector<int32_t>{256});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("decoder type 'CTC'"), std::string::npos);
}

TEST(Tokenizer, BadFilesAndConfigs) {
  EXPECT_FALSE(Tokenizer::FromJson("{not json", "", "x").ok());
  auto missing = Tokenizer::FromDir("/nonexistent/tokenizer/dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto bad_bos = Tokenizer::FromJson(ByteLevelJson().dump(), json({{"bos_token", "<nope>"}}).dump(), "x");
  ASSERT_FALSE(bad_bos.ok());
  EXPECT_NE(bad_bos.status().message().find("bos_token '<nope>'"), std::string::npos);
  json bad_regex = ByteLevelJson();
  bad_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}};
  auto r = Tokenizer::FromJson(bad_regex.dump(), "", "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(unclosed"), std::string::npos);
}

TEST(Tokenizer, SplitBehaviors) {
  // Digits split off contiguously, and single digits with individual_digits.
  json j = ByteLevelJson();
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Digits"}, {"individual_digits", true}};
  auto t = Load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(Ids(*t, "he12"), (std::vector<int32_t>{256, '1', '2'}));
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"String", "l"}}}, {"behavior", "Removed"}};
  auto removed = Load(j);
  ASSERT_TRUE(removed);
  EXPECT_EQ(Ids(*removed, "hello"), (std::vector<int32_t>{256, 'o'}));
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithNext";
  auto next = Load(j);
  ASSERT_TRUE(next);
  EXPECT_EQ(Ids(*next, "hello"), (std::vector<int32_t>{256, 'l', 'l', 'o'}));  // he|l|lo -> "lo" unmerged
}

}  // namespace
}  // namespace hypertrain::tokenizer
