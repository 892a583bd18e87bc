// `hypertrain prepare` end to end on real files: text, JSONL, gzip and Arrow
// inputs; shards equal the tokenizer's ids per document; manifest; output
// directory safety; errors; the loader's manifest checks and its direct
// reading of pre-tokenized Hugging Face datasets.
#include "runtime/data/prepare/prepare.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/data/loader.h"
#include "runtime/data/manifest.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer/testing.h"
#include "runtime/data/tokenizer/tokenizer.h"

namespace hypertrain::data::prepare {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Tmp(const std::string& name) {
  const std::string d = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  fs::remove_all(d);
  return d;
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

void WriteGz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

// All tokens of a prepared directory, shard by shard, per its manifest.
std::vector<int32_t> ReadAll(const std::string& dir, DataManifest* m = nullptr) {
  auto manifest = ReadManifest(dir);
  EXPECT_TRUE(manifest.ok() && manifest->has_value());
  std::vector<int32_t> all;
  for (const auto& s : (*manifest)->shards) {
    auto f = TokenFile::OpenShard(dir + "/" + s.file);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->num_tokens(), s.tokens);
    std::vector<int32_t> t((*f)->num_tokens());
    (*f)->Read(0, (*f)->num_tokens(), t.data());
    all.insert(all.end(), t.begin(), t.end());
  }
  if (m) *m = **manifest;
  return all;
}

const std::vector<std::string> kDocs = {
    "The first document.\nIt has two lines.", "\xec\x84\x9c\xec\x9a\xb8 Seoul \xf0\x9f\x91\x8d", "  indented\tcode();\n",
    "caf\xc3\xa9 1234567", "last one"};

// docs as JSONL (one per line, under "content"), text file, gzip JSONL.
std::vector<std::string> MakeInputs(const std::string& dir) {
  std::string jsonl;
  for (size_t i = 0; i < 3; ++i) jsonl += json({{"id", i}, {"content", kDocs[i]}}).dump() + "\n\n";
  Write(dir + "/a.jsonl", jsonl);
  Write(dir + "/b.txt", kDocs[3]);
  WriteGz(dir + "/c.jsonl.gz", json({{"content", kDocs[4]}}).dump() + "\n");
  return {dir + "/a.jsonl", dir + "/b.txt", dir + "/c.jsonl.gz"};
}

TEST(Prepare, RealTokenizerIdsPerDocumentOnAllThreads) {
  for (const std::string name : {"llama3", "llama2"}) {
    HT_REQUIRE_REAL_TOKENIZER(tok_dir, name);
    auto tok = tokenizer::Tokenizer::FromDir(tok_dir);
    ASSERT_TRUE(tok.ok());
    std::vector<int32_t> want;
    for (const std::string& d : kDocs) {
      if ((*tok)->add_bos()) want.push_back(*(*tok)->bos_id());
      auto ids = (*tok)->Encode(d, {.add_special = false});
      want.insert(want.end(), ids->begin(), ids->end());
      want.push_back(*(*tok)->eos_id());
    }
    const std::string base = Tmp("real_" + name);
    PrepareOptions o;
    o.inputs = MakeInputs(base);
    o.input.text_field = "content";
    o.tokenizer_dir = tok_dir;
    o.tokens_per_shard = 7;  // several shards, documents crossing them
    o.progress = false;
    for (int workers : {1, 4}) {
      o.out_dir = base + "/out" + std::to_string(workers);
      o.workers = workers;
      auto m = Prepare(o);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      DataManifest read;
      EXPECT_EQ(ReadAll(o.out_dir, &read), want) << name << " workers " << workers;
      EXPECT_EQ(read.tokenizer.sha256, (*tok)->sha256());
      EXPECT_EQ(read.tokenizer.vocab_size, (*tok)->vocab_size());
      EXPECT_EQ(read.bytes_per_token, name == "llama3" ? 4 : 2);
      EXPECT_EQ(read.documents, 5);
      EXPECT_EQ(read.tokens, static_cast<int64_t>(want.size()));
      ASSERT_EQ(read.inputs.size(), 3u);
      EXPECT_EQ(read.inputs[0].documents, 3);
      EXPECT_EQ(read.inputs[2].format, "jsonl.gz");
      EXPECT_GT(read.shards.size(), 3u);
    }
  }
}

PrepareOptions BytesOptions(const std::string& base) {
  PrepareOptions o;
  o.inputs = MakeInputs(base);
  o.input.text_field = "content";
  o.out_dir = base + "/out";
  o.progress = false;
  return o;
}

TEST(Prepare, BytesWithoutTokenizer) {
  const std::string base = Tmp("bytes");
  auto m = Prepare(BytesOptions(base));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<int32_t> want;
  for (const std::string& d : kDocs) {
    for (unsigned char c : d) want.push_back(c);
    want.push_back(0);
  }
  EXPECT_EQ(ReadAll(base + "/out"), want);
  EXPECT_EQ(m->tokenizer.kind, "bytes");
}

TEST(Prepare, OutputDirectoryIsNeverMixedOrHalfWritten) {
  const std::string base = Tmp("outdir");
  PrepareOptions o = BytesOptions(base);
  ASSERT_TRUE(Prepare(o).ok());
  const auto first = ReadAll(o.out_dir);
  // Non-empty: refused, untouched.
  auto again = Prepare(o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("--overwrite"), std::string::npos);
  // A run that fails half-way (bad line in the last input) leaves the old
  // data and no temporary directory.
  Write(base + "/bad.jsonl", "{\"content\": \"fine\"}\n{\"content\": 3}\n");
  o.inputs.push_back(base + "/bad.jsonl");
  o.overwrite = true;
  auto bad = Prepare(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.jsonl:2: no string field 'content'"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(ReadAll(o.out_dir), first);
  for (const auto& e : fs::directory_iterator(base)) {
    EXPECT_EQ(e.path().filename().string().find(".out.tmp"), std::string::npos) << e.path();
  }
  // --overwrite replaces it whole: a smaller run leaves no stale shard.
  o.inputs = {base + "/b.txt"};
  o.tokens_per_shard = 4;
  ASSERT_TRUE(Prepare(o).ok());
  DataManifest m;
  ReadAll(o.out_dir, &m);
  size_t bins = 0;
  for (const auto& e : fs::directory_iterator(o.out_dir)) bins += e.path().extension() == ".bin";
  EXPECT_EQ(bins, m.shards.size());
  EXPECT_EQ(m.documents, 1);
}

TEST(Prepare, BadInputsAreClearErrors) {
  const std::string base = Tmp("badinputs");
  fs::create_directories(base + "/somedir");
  Write(base + "/empty.txt", "");
  Write(base + "/notjson.jsonl", "{\"text\": \"ok\"}\nnot json\n");
  struct Case {
    std::string input, expect;
  };
  for (const Case& c : std::vector<Case>{{base + "/somedir", "is a directory, not a Hugging Face dataset"},
                                         {base + "/empty.txt", "is empty"},
                                         {base + "/missing.txt", "no such file"},
                                         {base + "/notjson.jsonl", "notjson.jsonl:2: not a JSON object"}}) {
    PrepareOptions o;
    o.inputs = {c.input};
    o.out_dir = base + "/out";
    o.progress = false;
    auto m = Prepare(o);
    ASSERT_FALSE(m.ok()) << c.input;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << m.status().message();
    EXPECT_FALSE(fs::exists(base + "/out"));
  }
  PrepareOptions o;
  o.inputs = {base + "/notjson.jsonl"};
  o.out_dir = base + "/out";
  o.tokenizer_dir = base + "/no_tokenizer_here";
  EXPECT_EQ(Prepare(o).status().code(), StatusCode::kNotFound);
}

TEST(Prepare, LoaderChecksTheManifest) {
  const std::string base = Tmp("loader");
  PrepareOptions o = BytesOptions(base);
  o.tokens_per_shard = 16;
  ASSERT_TRUE(Prepare(o).ok());
  LoaderOptions lo{.train_dir = o.out_dir, .vocab_size = 256, .micro_batch = 1, .seq = 8};
  {
    auto ok = DataLoader::Create(lo);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  }
  lo.vocab_size = 32000;
  auto other_vocab = DataLoader::Create(lo);
  ASSERT_FALSE(other_vocab.ok());
  EXPECT_NE(other_vocab.status().message().find("vocab is 256 ids, but model.vocab_size is 32000"), std::string::npos)
      << other_vocab.status().message();
  lo.vocab_size = 256;
  lo.tokenizer_sha256 = "0123456789abcdef";
  auto other_tok = DataLoader::Create(lo);
  ASSERT_FALSE(other_tok.ok());
  EXPECT_NE(other_tok.status().message().find("not with the configured model.data.tokenizer"), std::string::npos);
  lo.tokenizer_sha256.clear();
  fs::copy_file(o.out_dir + "/shard_00000.bin", o.out_dir + "/shard_09999.bin");
  auto stale = DataLoader::Create(lo);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.status().message().find("shard_09999.bin is not a shard of its manifest.json"), std::string::npos);
}

TEST(Prepare, HuggingFaceArrowDatasets) {
  HT_REQUIRE_NPM_MODULE(modules, "apache-arrow");
  const std::string base = Tmp("arrow");
  const std::string cmd = "NODE_PATH='" + modules + "' node runtime/data/arrow/testdata/make_hf_datasets.js '" + base +
                          "' > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream ef(base + "/expected.json");
  const json expected = json::parse(ef);
  // Text rows -> tokens (the null row skipped, the empty row an empty document).
  PrepareOptions o;
  o.inputs = {base + "/text_ds", base + "/dict_ds"};
  o.out_dir = base + "/out_text";
  o.progress = false;
  auto m = Prepare(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<int32_t> want;
  for (const json& d : expected["text_ds"]) {
    if (d.is_null()) continue;
    for (unsigned char c : d.get<std::string>()) want.push_back(c);
    want.push_back(0);
  }
  for (const json& d : expected["dict_train"]) {
    for (unsigned char c : d.get<std::string>()) want.push_back(c);
    want.push_back(0);
  }
  EXPECT_EQ(ReadAll(o.out_dir), want);
  EXPECT_EQ(m->inputs[0].documents, 5);
  EXPECT_EQ(m->inputs[0].format, "arrow");
  // Pre-tokenized rows: copied through prepare, and read by the loader as is.
  std::vector<int32_t> ids;
  for (const json& row : expected["tok_ds"]) {
    for (const json& v : row) ids.push_back(v.get<int32_t>());
  }
  LoaderOptions lo{.train_dir = base + "/tok_ds", .vocab_size = 128256, .micro_batch = 1,
                   .seq = static_cast<int64_t>(ids.size()) - 1};
  auto loader = DataLoader::Create(lo);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ((*loader)->num_tokens(), static_cast<int64_t>(ids.size()));
  auto batch = (*loader)->Next();
  ASSERT_TRUE(batch.ok());
  std::vector<int32_t> row((*batch)->inputs, (*batch)->inputs + lo.seq);
  row.push_back((*batch)->targets[lo.seq - 1]);
  EXPECT_EQ(row, ids);
  (*loader)->Release(*batch);
  lo.vocab_size = 1000;  // ids up to 128001: the loader reports them
  auto small = DataLoader::Create(lo);
  ASSERT_TRUE(small.ok());
  auto bad = (*small)->Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(">= model.vocab_size 1000"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::data::prepare
