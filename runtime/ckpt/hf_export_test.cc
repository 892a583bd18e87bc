#include "runtime/ckpt/hf_export.h"

#include <gtest/gtest.h>

#include <filesystem>

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
