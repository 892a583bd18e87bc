#include "operator/api/estimate.h"

#include <gtest/gtest.h>

namespace hypertrain::api {
namespace {

using nlohmann::json;

ObjectMeta Meta() {
  ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "ml";
  m.uid = "u";
  return m;
}

// The 1B recipe's shape on p5 nodes, as an inline config.
constexpr char k1b[] = R"(
trainer: {max_steps: 1000, precision: bf16}
model:
  shape: 1b
  max_context_width: 8192
  train_batch_size: 2
  activation_checkpointing: False
  sharding_strategy: hybrid_shard
)";

TrainingJobSpec Spec(const std::string& yaml, int nodes = 2, const char* instance = "ml.p5.48xlarge") {
  json spec = {{"image", "hypertrain:1"}, {"nodes", nodes}, {"estimateOnly", true},
               {"trainerConfig", {{"inline", yaml}}}};
  if (instance != nullptr) spec["instanceType"] = instance;
  if (instance == nullptr) spec["gpusPerNode"] = 8;
  auto s = ParseSpec(spec, Meta());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

TEST(EstimateJobTest, ReadsTheConfigAsTheTrainerDoes) {
  auto run = RunShapeFromTrainerConfig(k1b, 2, 8, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->model.hidden_size, 2048);
  EXPECT_EQ(run->seq_len, 8192);
  EXPECT_EQ(run->micro_batch, 2);
  EXPECT_EQ(run->world(), 16);
  EXPECT_EQ(run->checkpointing, contract::Checkpointing::kNone);
  // No shape: the trainer's default (tiny) with explicit fields on top.
  run = RunShapeFromTrainerConfig("model: {hidden_size: 256}\n", 1, 1, false);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->model.hidden_size, 256);
  EXPECT_EQ(run->model.num_hidden_layers, 4);
  EXPECT_EQ(run->seq_len, 128);
  EXPECT_EQ(run->device, contract::Device::kCpu);
  // The trainer's Lightning spellings (HyperPod recipes write them): issue 37.
  for (const auto& [name, want] : std::vector<std::pair<std::string, contract::Precision>>{
           {"bf16-mixed", contract::Precision::kBF16},
           {"16-mixed", contract::Precision::kFP16},
           {"32", contract::Precision::kFP32}}) {
    run = RunShapeFromTrainerConfig("trainer: {precision: " + name + "}\n", 1, 1, true);
    ASSERT_TRUE(run.ok()) << name << ": " << run.status().ToString();
    EXPECT_EQ(run->precision, want) << name;
  }
  for (const auto& [yaml, key] : std::vector<std::pair<std::string, std::string>>{
           {"model: {shape: 70b}\n", "model.shape"},
           {"model: {activation_checkpointing: partial}\n", "model.activation_checkpointing"},
           {"trainer: {precision: fp8}\n", "trainer.precision"},
           {"model: {sharding_strategy: zero3}\n", "model.sharding_strategy"},
           {"model: {hidden_size: [1]}\n", "model.hidden_size"},
           {"model: {num_key_value_heads: 3}\n", "model.num_key_value_heads"}}) {
    auto bad = RunShapeFromTrainerConfig(yaml, 1, 1, true);
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find("spec.trainerConfig.inline"), std::string::npos) << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(key), std::string::npos) << bad.status().ToString();
  }
}

TEST(EstimateJobTest, StatusEstimateForAP5Job) {
  auto e = EstimateJob(Spec(k1b));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)["parameters"], 1235814400);
  EXPECT_EQ((*e)["worldSize"], 16);
  EXPECT_EQ((*e)["shardDegree"], 8);
  EXPECT_EQ((*e)["fits"], true);
  EXPECT_EQ((*e)["gpuMemory"], int64_t{81559} << 20);
  EXPECT_EQ((*e)["maxSteps"], 1000);
  EXPECT_DOUBLE_EQ((*e)["tokens"].get<double>(), 1000.0 * 2 * 8192 * 16);
  const json& m = (*e)["memoryPerGpu"];
  EXPECT_EQ(m["inUse"].get<int64_t>(), m["allocated"].get<int64_t>() + m["overhead"].get<int64_t>());
  EXPECT_LT(m["inUse"].get<int64_t>(), (*e)["gpuMemory"].get<int64_t>());
  EXPECT_NEAR((*e)["gpuHours"].get<double>(), (*e)["seconds"].get<double>() / 3600 * 16, 1e-6);
  const std::string msg = (*e)["message"];
  EXPECT_NE(msg.find("1.24 B parameters on 16 ranks (hybrid_shard, shard degree 8)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(H100 80GB): fits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1000 steps in"), std::string::npos) << msg;
}

TEST(EstimateJobTest, WhatDoesNotFitSaysWhatWould) {
  const std::string eight = std::string(k1b).replace(std::string(k1b).find("shape: 1b"), 9, "shape: 8b");
  auto e = EstimateJob(Spec(eight, 1, "ml.g5.48xlarge"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)["fits"], false);
  EXPECT_NE((*e)["message"].get<std::string>().find("DOES NOT FIT"), std::string::npos);
  // An 8B at 8k tokens on 24 GB A10Gs fits nothing the estimate tries.
  EXPECT_FALSE(e->contains("fitsWith") && (*e)["fitsWith"].empty());
  auto p5 = EstimateJob(Spec(eight, 2));
  ASSERT_TRUE(p5.ok());
  EXPECT_EQ((*p5)["fits"], false);
  ASSERT_TRUE(p5->contains("fitsWith")) << p5->dump(2);
  EXPECT_EQ((*p5)["fitsWith"][0].get<std::string>().rfind("model.activation_checkpointing=", 0), 0u);
}

// PEFT: the adapters' state and the frozen base, 1/8 of it per GPU under
// hybrid_shard on a p5 node, instead of full training's state.
TEST(EstimateJobTest, PeftJobsAreEstimatedAsPeft) {
  const std::string eight = std::string(k1b).replace(std::string(k1b).find("shape: 1b"), 9, "shape: 8b");
  auto run = RunShapeFromTrainerConfig(
      "model: {shape: 8b, peft: {peft_type: LoRA, r: 32, target_modules: 'q, v_proj'}}\n", 1, 8, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->peft.type, "lora");
  EXPECT_EQ(run->peft.rank, 32);
  EXPECT_EQ(run->peft.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  run = RunShapeFromTrainerConfig("model: {peft: {peft_type: qlora}}\n", 1, 8, true);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->peft.targets.size(), 7u);
  EXPECT_TRUE(RunShapeFromTrainerConfig("model: {peft: {peft_type: none}}\n", 1, 8, true)->peft.type.empty());
  for (const std::string& bad : {std::string("model: {peft: {peft_type: dora}}\n"),
                                 std::string("model: {peft: {peft_type: lora, target_modules: [lm_head]}}\n")}) {
    auto r = RunShapeFromTrainerConfig(bad, 1, 8, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("model.peft."), std::string::npos) << r.status().ToString();
  }

  const std::string lora = eight + "  peft: {peft_type: lora, rank: 16}\n";
  auto full = EstimateJob(Spec(eight, 1));
  auto peft = EstimateJob(Spec(lora, 1));
  ASSERT_TRUE(full.ok() && peft.ok()) << peft.status().ToString();
  const json& m = (*peft)["memoryPerGpu"];
  // 8B in bf16 over 8 ranks: ~1.9 GiB of frozen base each; the adapters' state is small.
  EXPECT_NEAR(m["frozenBase"].get<double>() / (1 << 30), 16.06e9 / 8 / (1 << 30), 0.05);
  EXPECT_LT(m["optimizer"].get<int64_t>(), int64_t{1} << 30);
  // The same activations; no fp32 master, gradients and m/v of the 8B (~20 GiB per GPU here).
  EXPECT_GT((*full)["memoryPerGpu"]["allocated"].get<int64_t>() - m["allocated"].get<int64_t>(),
            int64_t{15} << 30);
  EXPECT_EQ((*full)["memoryPerGpu"]["frozenBase"], 0);
}

// model.peft.fp8_base: LoRA's block projections as e4m3 codes (a byte per
// element), the embedding and LM head still bf16: the 8B base at ~8.5 GiB
// instead of ~15.0, whatever the shard group.
TEST(EstimateJobTest, AnFp8BaseIsCountedInFp8) {
  const std::string eight = std::string(k1b).replace(std::string(k1b).find("shape: 1b"), 9, "shape: 8b");
  auto run = RunShapeFromTrainerConfig("model: {shape: 8b, peft: {peft_type: lora, fp8_base: true}}\n", 1, 8, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->peft.fp8_base);
  run = RunShapeFromTrainerConfig("model: {shape: 8b, peft: {peft_type: none, fp8_base: true}}\n", 1, 8, true);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->peft.fp8_base);  // no PEFT, no frozen base
  auto bad = RunShapeFromTrainerConfig("model: {peft: {peft_type: lora, fp8_base: maybe}}\n", 1, 8, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.peft.fp8_base"), std::string::npos) << bad.status().ToString();

  auto bf16 = EstimateJob(Spec(eight + "  peft: {peft_type: lora, rank: 16}\n", 1));
  auto fp8 = EstimateJob(Spec(eight + "  peft: {peft_type: lora, rank: 16, fp8_base: true}\n", 1));
  ASSERT_TRUE(bf16.ok() && fp8.ok()) << fp8.status().ToString();
  const double a = (*bf16)["memoryPerGpu"]["frozenBase"].get<double>();
  const double b = (*fp8)["memoryPerGpu"]["frozenBase"].get<double>();
  EXPECT_NEAR(b / a, 8.46 / 14.96, 0.01) << a << " " << b;
}

TEST(EstimateJobTest, WithoutAKnownInstanceTheFitIsNotChecked) {
  auto e = EstimateJob(Spec(k1b, 2, nullptr));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_FALSE(e->contains("fits"));
  EXPECT_NE((*e)["message"].get<std::string>().find("fit not checked"), std::string::npos);
}

TEST(EstimateJobTest, ConfigMapConfigsAreNotEstimated) {
  auto s = ParseSpec({{"image", "hypertrain:1"}, {"instanceType", "ml.p5.48xlarge"}, {"estimateOnly", true},
                      {"trainerConfig", {{"configMapRef", {{"name", "cfg"}}}}}},
                     Meta());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->estimate_only);
  auto e = EstimateJob(*s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(e.status().message().find("hypertrain estimate"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::api
