#include "runtime/ckpt/hf_export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/atomic_file.h"
#include "runtime/ckpt/layout_desc.h"
#include "runtime/ckpt/test_util.h"
#include "runtime/model/layout.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class HfExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/hf_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  model::ModelConfig Tiny(bool tied) {
    model::ModelConfig c = *model::NamedModelConfig("tiny");
    c.tie_word_embeddings = tied;
    return c;
  }
  std::string dir_;
};

// Every element of every unit, read back through HfWeights::ReadRange.
std::vector<std::vector<float>> ReadAllUnits(const HfWeights& w, const ModelLayoutDesc& d) {
  std::vector<std::vector<float>> out;
  for (const UnitEntry& u : d.units) {
    std::vector<float> v(u.padded_numel, -1.0f);
    EXPECT_TRUE(w.ReadRange(u, {0, u.padded_numel}, v.data()).ok());
    out.push_back(std::move(v));
  }
  return out;
}

TEST_F(HfExportTest, ExportImportIdenticalF32AndRoundedBf16TiedAndUntied) {
  for (bool tied : {true, false}) {
    const model::ModelConfig cfg = Tiny(tied);
    auto layout = model::ParamLayout::Build(cfg, {64, 4});
    ASSERT_TRUE(layout.ok());
    const ModelLayoutDesc d = DescribeLayout(*layout);
    auto fill = [](const TensorEntry& t, float* dst) {
      for (int64_t i = 0; i < t.numel; ++i) dst[i] = testing::ValueOf(t.name, i, 0);
      return Status::Ok();
    };
    for (StDType dt : {StDType::kF32, StDType::kBF16}) {
      const std::string out = dir_ + "/export_" + StDTypeName(dt) + (tied ? "_tied" : "_untied");
      ASSERT_TRUE(ExportHf(d, cfg, out, dt, fill).ok());
      auto st = SafetensorsReader::Open(out + "/model.safetensors");
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      EXPECT_EQ(st->Find("lm_head.weight") != nullptr, !tied);
      ASSERT_NE(st->Find("model.layers.3.mlp.down_proj.weight"), nullptr);
      EXPECT_EQ(st->Find("model.layers.3.mlp.down_proj.weight")->shape, (std::vector<int64_t>{128, 384}));
      ASSERT_NE(st->Find("model.layers.0.self_attn.k_proj.weight"), nullptr);
      EXPECT_EQ(st->Find("model.layers.0.self_attn.k_proj.weight")->shape, (std::vector<int64_t>{64, 128}));
      EXPECT_NE(st->Find("model.layers.2.post_attention_layernorm.weight"), nullptr);
      EXPECT_NE(st->Find("model.embed_tokens.weight"), nullptr);
      EXPECT_NE(st->Find("model.norm.weight"), nullptr);
      json cj = json::parse(*ReadFileToString(out + "/config.json"));
      EXPECT_EQ(cj["architectures"][0], "LlamaForCausalLM");
      EXPECT_EQ(cj["tie_word_embeddings"], tied);
      EXPECT_EQ(cj["torch_dtype"], dt == StDType::kF32 ? "float32" : "bfloat16");

      // Import into a differently padded layout (as another shard count would).
      auto layout2 = model::ParamLayout::Build(cfg, {64, 6});
      const ModelLayoutDesc d2 = DescribeLayout(*layout2);
      auto w = HfWeights::Open(out, cfg);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      ASSERT_TRUE(w->CheckCovers(d2).ok());
      const auto got = ReadAllUnits(*w, d2);
      for (const UnitEntry& u : d2.units) {
        const auto want = testing::Expected(d2, u.index, {0, u.padded_numel}, 0);
        for (int64_t i = 0; i < u.padded_numel; ++i) {
          const float e = dt == StDType::kF32 ? want[i] : Bf16ToFloat(FloatToBf16(want[i]));
          ASSERT_EQ(got[u.index][i], e) << u.name << " element " << i;
        }
      }
    }
  }
}

TEST_F(HfExportTest, ConfigMismatchAndMissingTensorsAreNamed) {
  const model::ModelConfig tied = Tiny(true);
  auto layout = model::ParamLayout::Build(tied, {});
  const ModelLayoutDesc d = DescribeLayout(*layout);
  ASSERT_TRUE(ExportHf(d, tied, dir_ + "/m", StDType::kF32, [](const TensorEntry&, float* dst) {
                dst[0] = 1;
                return Status::Ok();
              }).ok());
  model::ModelConfig other = tied;
  other.num_hidden_layers = 5;
  auto w = HfWeights::Open(dir_ + "/m", other);
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("num_hidden_layers 4 vs 5"), std::string::npos) << w.status().ToString();
  // An untied model cannot start from a tied file: lm_head.weight is missing.
  json cj = json::parse(*ReadFileToString(dir_ + "/m/config.json"));
  cj["tie_word_embeddings"] = false;
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/m/config.json", cj.dump()).ok());
  const model::ModelConfig untied = Tiny(false);
  auto w2 = HfWeights::Open(dir_ + "/m", untied);
  ASSERT_TRUE(w2.ok());
  Status s = w2->CheckCovers(DescribeLayout(*model::ParamLayout::Build(untied, {})));
  EXPECT_NE(s.message().find("no tensor lm_head.weight"), std::string::npos) << s.ToString();
  EXPECT_EQ(HfWeights::Open(dir_ + "/absent", tied).status().code(), StatusCode::kNotFound);
}

TEST_F(HfExportTest, ShardedIndexAndTiedFileWithExtraLmHead) {
  // A tied model loads from files that also carry lm_head.weight, split over
  // two shards listed in model.safetensors.index.json.
  const model::ModelConfig cfg = Tiny(true);
  const ModelLayoutDesc d = DescribeLayout(*model::ParamLayout::Build(cfg, {}));
  std::vector<StTensorOut> first, second;
  json wm = json::object();
  for (const UnitEntry& u : d.units) {
    for (const TensorEntry& t : u.tensors) {
      StTensorOut o{t.name, t.shape, [t](float* dst) {
                      for (int64_t i = 0; i < t.numel; ++i) dst[i] = testing::ValueOf(t.name, i, 0);
                      return Status::Ok();
                    }};
      (u.index % 2 == 0 ? first : second).push_back(o);
      wm[t.name] = u.index % 2 == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
  }
  second.push_back({"lm_head.weight", {cfg.vocab_size, cfg.hidden_size}, [](float* dst) { dst[0] = 7; return Status::Ok(); }});
  wm["lm_head.weight"] = "model-00002-of-00002.safetensors";
  fs::create_directories(dir_ + "/s");
  ASSERT_TRUE(WriteSafetensors(dir_ + "/s/model-00001-of-00002.safetensors", StDType::kBF16, first, {}).ok());
  ASSERT_TRUE(WriteSafetensors(dir_ + "/s/model-00002-of-00002.safetensors", StDType::kBF16, second, {}).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/s/model.safetensors.index.json", json({{"weight_map", wm}}).dump()).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/s/config.json", HfConfigJson(cfg, StDType::kBF16).dump()).ok());
  auto w = HfWeights::Open(dir_ + "/s", cfg);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(w->CheckCovers(d).ok());
  const UnitEntry& emb = d.units[0];
  std::vector<float> v(emb.padded_numel);
  ASSERT_TRUE(w->ReadRange(emb, {0, emb.padded_numel}, v.data()).ok());
  const auto want = testing::Expected(d, 0, {0, emb.padded_numel}, 0);
  for (int64_t i = 0; i < emb.padded_numel; ++i) ASSERT_EQ(v[i], Bf16ToFloat(FloatToBf16(want[i])));
}

// Llama-3.2-1B's config.json as transformers 4.x and 5.x write it: the same
// model either way (5.x moves rope_theta and the scaling into rope_parameters).
TEST(HfConfigTest, Transformers4And5RopeForms) {
  const model::ModelConfig want = *model::NamedModelConfig("1b");
  json v4 = HfConfigJson(want, StDType::kBF16);
  ASSERT_TRUE(v4.contains("rope_scaling"));
  json v5 = v4;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "llama3"},     {"rope_theta", 500000.0},
                           {"factor", 32.0},            {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},   {"original_max_position_embeddings", 8192}};
  for (const json& j : {v4, v5}) {
    auto c = ModelConfigFromHf(j);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->rope_theta, 500000.0);
    EXPECT_EQ(c->rope_scaling.type, model::RopeScalingType::kLlama3);
    EXPECT_EQ(c->rope_scaling.factor, 32.0);
    EXPECT_TRUE(CheckHfConfigMatches(j, want).ok()) << CheckHfConfigMatches(j, want).ToString();
  }
  // 5.x without scaling: rope_type default.
  json plain = v5;
  plain["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  auto p = ModelConfigFromHf(plain);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->rope_theta, 10000.0);
  EXPECT_EQ(p->rope_scaling.type, model::RopeScalingType::kNone);
  // A different scaling factor is a mismatch, named.
  v5["rope_parameters"]["factor"] = 8.0;
  const Status st = CheckHfConfigMatches(v5, want);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rope_scaling.factor 8"), std::string::npos) << st.message();
  json yarn = v4;
  yarn["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  auto y = ModelConfigFromHf(yarn);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("rope_parameters type 'yarn' is not supported"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::ckpt

namespace hypertrain::ckpt {
namespace {

json ReadJson(const std::string& path) {
  StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return text.ok() ? json::parse(*text) : json();
}

// Issue 40: an export of a model trained from a Hugging Face base keeps the
// base's token ids (eos a list), max_position_embeddings (not the training
// length) and RoPE in the base's transformers format, and writes its
// generation_config.json: for golden transformers v4 and v5 files the export
// reproduces them.
TEST_F(HfExportTest, ExportOfAGoldenBaseReproducesItsConfigAndGenerationConfig) {
  for (const char* version : {"transformers-v4", "transformers-v5"}) {
    SCOPED_TRACE(version);
    const std::string golden = std::string("runtime/ckpt/testdata/hf_golden/") + version;
    StatusOr<HfBase> base = ReadHfBase(golden);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    StatusOr<model::ModelConfig> cfg = ModelConfigFromHf(base->config);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    // As the trainer has it: trained at 32 tokens, no max_position_embeddings key.
    model::ModelConfig trained = *cfg;
    trained.max_context_width = 32;
    trained.max_position_embeddings = 0;
    EXPECT_EQ(HfConfigJson(trained, StDType::kBF16)["max_position_embeddings"], 32);  // what was written before
    auto layout = model::ParamLayout::Build(trained, {64, 4});
    ASSERT_TRUE(layout.ok());
    const std::string out = dir_ + "/" + version;
    ASSERT_TRUE(ExportHf(DescribeLayout(*layout), trained, out, StDType::kBF16,
                         [](const TensorEntry& t, float* dst) {
                           std::fill(dst, dst + t.numel, 0.5f);
                           return Status::Ok();
                         },
                         *base)
                    .ok());
    const json got = ReadJson(out + "/config.json");
    EXPECT_EQ(got, ReadJson(golden + "/config.json")) << got.dump(2);
    EXPECT_EQ(ReadJson(out + "/generation_config.json"), ReadJson(golden + "/generation_config.json"));
    EXPECT_TRUE(got["eos_token_id"].is_array());
    // The export loads back as the same model.
    EXPECT_TRUE(CheckHfConfigMatches(got, trained).ok());
    // fp32: only the dtype changes, under the base's own key.
    json f32 = HfExportConfigJson(trained, StDType::kF32, *base);
    EXPECT_EQ(f32.value(std::string(version) == "transformers-v5" ? "dtype" : "torch_dtype", ""), "float32");
    EXPECT_EQ(f32.contains("torch_dtype") + f32.contains("dtype"), 1);
  }
}

TEST_F(HfExportTest, GenerationConfigWithoutTheBasesFileIsDerivedFromConfigJson) {
  HfBase base;
  base.config = ReadJson("runtime/ckpt/testdata/hf_golden/transformers-v4/config.json");
  base.config["eos_token_id"] = 128001;  // Llama-3.1-8B (base): one id
  base.config["bos_token_id"] = 128000;
  model::ModelConfig trained = *ModelConfigFromHf(base.config);
  const json cfg = HfExportConfigJson(trained, StDType::kBF16, base);
  EXPECT_EQ(cfg["eos_token_id"], 128001);
  EXPECT_EQ(HfGenerationConfigJson(cfg, base),
            json({{"_from_model_config", true}, {"bos_token_id", 128000}, {"eos_token_id", 128001},
                  {"transformers_version", "4.45.2"}}));
  // No base at all: the model's own config.json; the recipe's
  // max_position_embeddings when it gives one.
  model::ModelConfig scratch = Tiny(false);
  EXPECT_EQ(HfExportConfigJson(scratch, StDType::kBF16, HfBase())["max_position_embeddings"], scratch.max_context_width);
  scratch.max_position_embeddings = 8192;
  EXPECT_EQ(HfExportConfigJson(scratch, StDType::kBF16, HfBase())["max_position_embeddings"], 8192);
  EXPECT_EQ(HfGenerationConfigJson(HfConfigJson(scratch, StDType::kBF16), HfBase()), json({{"_from_model_config", true}}));
  // A base directory without config.json is an error naming the file.
  StatusOr<HfBase> none = ReadHfBase(dir_);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(dir_ + "/config.json"), std::string::npos) << none.status().ToString();
}

}  // namespace
}  // namespace hypertrain::ckpt
