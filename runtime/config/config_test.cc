#include "runtime/config/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace hypertrain::config {
namespace {

const char* kRecipe = R"(
run:
  name: llama3-1b
trainer:
  devices: 8
  num_nodes: 2
  accelerator: gpu
  precision: bf16
  max_steps: 50
  log_every_n_steps: 5
exp_manager:
  exp_dir: /fsx/exp
  create_tensorboard_logger: true
  checkpoint_callback_params:
    save_top_k: 3
model:
  model_type: llama_v3
  shape: 1b
  train_batch_size: 4
  seed: 7
  grad_clip: 1.0
  activation_checkpointing: true
  sharding_strategy: hybrid_shard
  shard_degree: 8
  max_context_width: 2048
  rope_scaling:
    rope_type: llama3
    factor: 32.0
    high_freq_factor: 4.0
    low_freq_factor: 1.0
    original_max_position_embeddings: 8192
  optim:
    name: adamw
    lr: 2.0e-4
    weight_decay: 0.01
    betas: [0.9, 0.98]
    sched:
      name: CosineAnnealing
      warmup_steps: 10
      constant_steps: 0
      min_lr: 2.0e-5
  data:
    train_dir: /fsx/data
    use_synthetic_data: false
  frobnicate: 3
trainer_typo: 1
)";

// kRecipe holds two typos on purpose: warn, so that the other tests parse it.
const char* kWarn = "hypertrain.unknown_keys=warn";
std::vector<std::string> WithWarn(std::vector<std::string> sets) {
  sets.insert(sets.begin(), kWarn);
  return sets;
}

TEST(ConfigTest, ParsesAHyperPodRecipe) {
  auto c = ParseTrainConfig(kRecipe, {kWarn});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->max_steps, 50);
  EXPECT_EQ(c->devices, 8);
  EXPECT_EQ(c->model.hidden_size, 2048);
  EXPECT_EQ(c->model.rope_scaling.factor, 32.0);
  EXPECT_EQ(c->model.max_context_width, 2048);
  EXPECT_EQ(c->activation_checkpointing, model::ActivationCheckpointing::kFull);
  EXPECT_EQ(c->optim.beta2, 0.98);
  EXPECT_EQ(c->optim.sched, config::ScheduleKind::kCosine);
  EXPECT_EQ(c->optim.warmup_steps, 10);
  EXPECT_EQ(c->seed, 7u);
  EXPECT_EQ(c->checkpoint_dir, "/fsx/exp/checkpoints");
  EXPECT_FALSE(c->loss_scale.enabled);
  EXPECT_TRUE(c->deterministic);  // reproducible unless asked otherwise
  EXPECT_EQ(c->unknown_keys, (std::vector<std::string>{"model.frobnicate", "trainer_typo"}));
}

TEST(ConfigTest, OverridesApplyBeforeValidation) {
  auto c = ParseTrainConfig(kRecipe, {kWarn, "model.optim.lr=0.01", "trainer.precision=fp16",
                                      "model.optim.betas=[0.8, 0.9]", "model.data.prefetch_depth=5",
                                      "exp_manager.new_section.x=1"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->optim.lr, 0.01);
  EXPECT_EQ(c->precision, model::Precision::kFP16);
  EXPECT_TRUE(c->loss_scale.enabled);
  EXPECT_EQ(c->optim.beta1, 0.8);
  EXPECT_EQ(c->data.prefetch_depth, 5);
  auto fast = ParseTrainConfig(kRecipe, {kWarn, "trainer.deterministic=false"});
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_FALSE(fast->deterministic);
  EXPECT_NE(std::find(c->unknown_keys.begin(), c->unknown_keys.end(), "exp_manager.new_section.x"),
            c->unknown_keys.end());
  auto bad = ParseTrainConfig(kRecipe, {kWarn, "model.optim.lr"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected key.path=value"), std::string::npos);
}

void ExpectError(const std::vector<std::string>& sets, const std::string& needle) {
  auto c = ParseTrainConfig(kRecipe, WithWarn(sets));
  ASSERT_FALSE(c.ok()) << needle;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
}

TEST(ConfigTest, BadValuesNameTheKeyAndAcceptedValues) {
  ExpectError({"model.activation_checkpointing=partial"},
              "model.activation_checkpointing: 'partial' is not one of none, selective, full");
  ExpectError({"trainer.precision=fp8"}, "trainer.precision: 'fp8' is not one of bf16, fp16, fp32, tf32");
  ExpectError({"model.sharding_strategy=zero3"},
              "model.sharding_strategy: 'zero3' is not one of hybrid_shard, full_shard, "
              "hybrid_shard_zero2, shard_grad_op, no_shard");
  ExpectError({"model.hidden_size=abc"}, "model.hidden_size: 'abc' is not an integer");
  ExpectError({"model.num_key_value_heads=5"}, "model.num_key_value_heads (5) must divide");
  ExpectError({"model.optim.lr=-1"}, "model.optim.lr: -1 must be > 0");
  ExpectError({"model.optim.betas=[0.9]"}, "model.optim.betas: expected a list of two numbers");
  ExpectError({"model.optim.sched.name=poly"}, "model.optim.sched.name: 'poly' is not one of");
  ExpectError({"model.shape=70b"}, "model.shape: '70b' is not one of tiny, 125m, 1b, 8b");
  ExpectError({"trainer.max_steps=0"}, "trainer.max_steps: 0 must be >= 1");
  ExpectError({"model.data.train_dir=null"}, "model.data.train_dir: required unless");
  ExpectError({"trainer.deterministic=sometimes"},
              "trainer.deterministic: 'sometimes' is not true or false");
  ExpectError({"trainer.backend=tpu"}, "trainer.backend: 'tpu' is not one of auto, cpu, cuda");
  ExpectError({"exp_manager.checkpoint.failure_policy=retry"},
              "exp_manager.checkpoint.failure_policy: 'retry' is not one of stop, continue");
  ExpectError({"distributed.reduce_dtype=fp16"}, "distributed.reduce_dtype: 'fp16' is not one of fp32, bf16");
  ExpectError({"cuda.attention_impl=flash"},
              "cuda.attention_impl: 'flash' is not one of auto, cudnn, cudnn-fast, cudnn-fwd, tiled, simple");
  ExpectError({"model.data=5"}, "");  // a scalar where a map is expected still fails clearly
}

// The enum keys are parsed once, when the config is read; the describe output
// and the logs use the same names.
TEST(ConfigTest, EnumKeysAreTypedAndDescribedByName) {
  auto d = ParseTrainConfig(kRecipe, {kWarn});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->sharding_strategy, contract::ShardingStrategy::kHybridShard);
  EXPECT_EQ(d->checkpoint.failure_policy, FailurePolicy::kStop);
  EXPECT_EQ(d->distributed.reduce_dtype, ReduceDtype::kFp32);
  auto c = ParseTrainConfig(kRecipe, {kWarn, "model.sharding_strategy=full_shard", "model.shard_degree=0",
                                      "exp_manager.checkpoint.failure_policy=continue",
                                      "distributed.reduce_dtype=bf16", "exp_manager.every_n_train_steps=4",
                                      "exp_manager.every_n_minutes=7.5"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sharding_strategy, contract::ShardingStrategy::kFullShard);
  EXPECT_EQ(c->checkpoint.failure_policy, FailurePolicy::kContinue);
  EXPECT_EQ(c->distributed.reduce_dtype, ReduceDtype::kBf16);
  EXPECT_EQ(c->checkpoint.every_n_train_steps, 4);
  EXPECT_EQ(c->checkpoint.every_n_minutes, 7.5);
  const std::string text = DescribeConfig(*c);
  for (const char* line : {"sharding_strategy: full_shard", "failure_policy: continue", "reduce_dtype: bf16",
                           "every_n_train_steps: 4", "every_n_minutes: 7.5"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  // A map where a name is expected is the reader's error, not the enum's.
  ExpectError({"exp_manager.checkpoint.failure_policy={a: 1}"},
              "exp_manager.checkpoint.failure_policy: expected a string, got a map");
  // null keeps the default.
  auto null = ParseTrainConfig(kRecipe, {kWarn, "distributed.reduce_dtype=null"});
  ASSERT_TRUE(null.ok()) << null.status().ToString();
  EXPECT_EQ(null->distributed.reduce_dtype, ReduceDtype::kFp32);
}

// The p5 recipes' FP8 block, as written (YAML 1.1 "True"), plus our own keys.
TEST(ConfigTest, Fp8Keys) {
  auto off = ParseTrainConfig(kRecipe, {kWarn});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->fp8.enabled);
  auto c = ParseTrainConfig(kRecipe, {kWarn, "model.fp8=True", "model.fp8_amax_history_len=1024",
                                      "model.fp8_amax_compute_algo=max"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->fp8.enabled);
  EXPECT_EQ(c->fp8.amax_history_len, 1024);
  EXPECT_EQ(c->fp8.amax_compute_algo, model::AmaxComputeAlgo::kMax);
  EXPECT_EQ(c->fp8.recipe, model::Fp8Recipe::kDelayed);
  EXPECT_EQ(c->fp8.grad_format, model::Fp8Format::kE5M2);
  EXPECT_FALSE(c->fp8.lm_head);
  EXPECT_TRUE(c->unknown_keys == (std::vector<std::string>{"model.frobnicate", "trainer_typo"}));
  auto t = ParseTrainConfig(kRecipe, {kWarn, "model.fp8=true", "model.fp8_recipe=tensorwise",
                                      "model.fp8_amax_compute_algo=most_recent",
                                      "model.fp8_grad_format=e4m3", "model.fp8_lm_head=yes",
                                      "model.fp8_margin=1"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->fp8.recipe, model::Fp8Recipe::kTensorwise);
  EXPECT_EQ(t->fp8.amax_compute_algo, model::AmaxComputeAlgo::kMostRecent);
  EXPECT_EQ(t->fp8.grad_format, model::Fp8Format::kE4M3);
  EXPECT_TRUE(t->fp8.lm_head);
  EXPECT_EQ(t->fp8.margin, 1);
  ExpectError({"model.fp8_amax_compute_algo=mean"},
              "model.fp8_amax_compute_algo: 'mean' is not one of max, most_recent");
  ExpectError({"model.fp8_recipe=mx"}, "model.fp8_recipe: 'mx' is not one of delayed, tensorwise");
  ExpectError({"model.fp8_grad_format=e3m4"}, "model.fp8_grad_format: 'e3m4' is not one of e5m2, e4m3");
  ExpectError({"model.fp8_amax_history_len=0"}, "model.fp8_amax_history_len: 0 must be in");
  ExpectError({"model.fp8=maybe"}, "model.fp8: 'maybe' is not true or false");
  ExpectError({"model.fp8=true", "trainer.precision=fp16"},
              "model.fp8: FP8 GEMMs run inside bf16 training; trainer.precision is fp16");
}

TEST(ConfigTest, SyntaxErrorsGiveTheLine) {
  auto c = ParseTrainConfig("trainer:\n  max_steps: [1,\n", {}, "job.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("job.yaml: YAML syntax error at line"), std::string::npos);
  EXPECT_FALSE(LoadTrainConfig("/nonexistent/job.yaml", {}).ok());
}

TEST(ConfigTest, ShippedExamplesParse) {
  for (const char* f : {"examples/tiny-cpu.yaml", "examples/llama3-1b-gpu.yaml"}) {
    auto c = LoadTrainConfig(f, {});
    ASSERT_TRUE(c.ok()) << f << ": " << c.status().ToString();
    EXPECT_TRUE(c->unknown_keys.empty()) << f << ": " << c->unknown_keys.front();
  }
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr char kSmall[] =
    "trainer: {max_steps: 3}\nexp_manager: {exp_dir: /e, checkpoint_dir: /from/file}\n"
    "model: {shape: tiny, data: {use_synthetic_data: true}}\n";

StatusOr<TrainConfig> Load(const std::string& flag, const std::vector<std::string>& sets, const EnvLookup& env) {
  HT_ASSIGN_OR_RETURN(RunConfigSource src, ResolveRunConfig(flag, sets, env));
  return LoadTrainConfig(src.path, src.overrides);
}

TEST(RunConfigTest, ConfigPathFromTheFlagElseFromTheOperatorsEnv) {
  const std::string a = WriteTemp("a.yaml", kSmall);
  const std::string b = WriteTemp("b.yaml", "trainer: {max_steps: 3}\nmodel: {shape: tiny, seed: 9, data: {use_synthetic_data: true}}\n");
  auto c = Load("", {}, EnvFromMap({{"HYPERTRAIN_CONFIG", b}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->seed, 9u);  // b.yaml, found through the env
  c = Load(a, {}, EnvFromMap({{"HYPERTRAIN_CONFIG", b}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->seed, 1234u);  // --config wins
  auto none = ResolveRunConfig("", {}, EnvFromMap({{"HYPERTRAIN_CONFIG", ""}}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("--config is not given and HYPERTRAIN_CONFIG is unset"), std::string::npos);
}

TEST(RunConfigTest, CheckpointDirFromTheEnvReplacesTheFilesAndASetWins) {
  const std::string a = WriteTemp("ck.yaml", kSmall);
  auto c = Load(a, {}, EnvFromMap({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->checkpoint_dir, "/from/file");
  // Any path survives, quotes, colons and '#' included.
  const std::string odd = "/fsx/job \"a\": #1\\x";
  c = Load(a, {}, EnvFromMap({{"HYPERTRAIN_CHECKPOINT_DIR", odd}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->checkpoint_dir, odd);
  c = Load(a, {"exp_manager.checkpoint_dir=/from/set"}, EnvFromMap({{"HYPERTRAIN_CHECKPOINT_DIR", "/from/env"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->checkpoint_dir, "/from/set");
  EXPECT_FALSE(ResolveRunConfig(a, {}, EnvFromMap({{"HYPERTRAIN_CHECKPOINT_DIR", "/x\ny"}})).ok());
}

TEST(ConfigTest, ProfileKeys) {
  auto c = ParseTrainConfig(kRecipe, {kWarn});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->profile.enabled());
  c = ParseTrainConfig(kRecipe, {kWarn, "trainer.profile.start_step=10", "trainer.profile.num_steps=3",
                                 "trainer.profile.dir=/tmp/t"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->profile.enabled());
  EXPECT_EQ(c->profile.start_step, 10);
  EXPECT_EQ(c->profile.num_steps, 3);
  EXPECT_EQ(c->profile.dir, "/tmp/t");
  ExpectError({"trainer.profile.num_steps=101"}, "trainer.profile.num_steps: 101 must be in [0, 100] (0 = off)");
  ExpectError({"trainer.profile.start_step=-2"}, "trainer.profile.start_step: -2 must be >= 0");
}

// The operator passes the job's profile annotation as HYPERTRAIN_PROFILE.
TEST(RunConfigTest, ProfileFromTheEnvAndASetWins) {
  const std::string a = WriteTemp("pr.yaml", kSmall);
  auto c = Load(a, {}, EnvFromMap({{"HYPERTRAIN_PROFILE", "start_step=7,num_steps=2,dir=/fsx/t r"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->profile.start_step, 7);
  EXPECT_EQ(c->profile.num_steps, 2);
  EXPECT_EQ(c->profile.dir, "/fsx/t r");
  c = Load(a, {"trainer.profile.num_steps=0"}, EnvFromMap({{"HYPERTRAIN_PROFILE", "num_steps=2"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->profile.enabled());
  auto bad = ResolveRunConfig(a, {}, EnvFromMap({{"HYPERTRAIN_PROFILE", "steps=2"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HYPERTRAIN_PROFILE: unknown key 'steps'"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace hypertrain::config
