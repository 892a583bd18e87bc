// The HyperPod recipe keys (issue 20): booleans, checkpoint_callback_params,
// export_full_model, auto_checkpoint, fine-tuning, validation, keys that
// cannot be honoured, unknown keys, HT_* overrides and the printed config.
#include <gtest/gtest.h>

#include <map>

#include "runtime/config/config.h"

namespace hypertrain::config {
namespace {

const char* kBase = "model:\n  data:\n    use_synthetic_data: true\n";

StatusOr<TrainConfig> Parse(std::vector<std::string> sets, const EnvLookup& env = nullptr) {
  return ParseTrainConfig(kBase, sets, "<test>", env);
}

void ExpectError(const std::vector<std::string>& sets, const std::string& message) {
  auto c = Parse(sets);
  ASSERT_FALSE(c.ok()) << testing::PrintToString(sets);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), message) << testing::PrintToString(sets);
}

TEST(RecipeKeys, Yaml11BooleansWhereverABoolIsMeant) {
  for (const char* t : {"True", "true", "TRUE", "yes", "Yes", "on"}) {
    auto c = Parse({std::string("model.activation_checkpointing=") + t, std::string("model.fp8=") + t,
                    std::string("trainer.deterministic=") + t});
    ASSERT_TRUE(c.ok()) << t << ": " << c.status().ToString();
    EXPECT_EQ(c->activation_checkpointing, model::ActivationCheckpointing::kFull) << t;
    EXPECT_TRUE(c->fp8.enabled) << t;
    EXPECT_TRUE(c->deterministic) << t;
  }
  for (const char* f : {"False", "false", "no", "No", "off"}) {
    auto c = Parse({std::string("model.activation_checkpointing=") + f, std::string("model.fp8=") + f,
                    std::string("trainer.deterministic=") + f});
    ASSERT_TRUE(c.ok()) << f << ": " << c.status().ToString();
    EXPECT_EQ(c->activation_checkpointing, model::ActivationCheckpointing::kNone) << f;
    EXPECT_FALSE(c->fp8.enabled) << f;
    EXPECT_FALSE(c->deterministic) << f;
  }
  auto sel = Parse({"model.activation_checkpointing=selective"});
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->activation_checkpointing, model::ActivationCheckpointing::kSelective);
  ExpectError({"model.activation_checkpointing=partial"},
              "model.activation_checkpointing: 'partial' is not one of none, selective, full, true (= full), "
              "false (= none)");
  ExpectError({"model.fp8=maybe"}, "model.fp8: 'maybe' is not true or false");
}

TEST(RecipeKeys, CheckpointCallbackParams) {
  const std::string cb = "exp_manager.checkpoint_callback_params.";
  auto c = Parse({cb + "save_top_k=3", cb + "every_n_train_steps=10", cb + "save_last=False", cb + "monitor=step",
                  cb + "mode=max"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->save_top_k, 3);
  EXPECT_EQ(c->checkpoint.every_n_train_steps, 10);
  EXPECT_FALSE(c->checkpoint.save_last);
  EXPECT_TRUE(c->checkpoint.enabled);
  auto all = Parse({cb + "save_top_k=-1"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->save_top_k, -1);
  // save_top_k: 0 turns sharded checkpoints off, and says so.
  auto off = Parse({cb + "save_top_k=0"});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->checkpoint.enabled);
  EXPECT_EQ(off->checkpoint.disabled_by, cb + "save_top_k: 0");
  ASSERT_FALSE(off->notes.empty());
  EXPECT_NE(off->notes[0].find("no sharded checkpoints are written"), std::string::npos) << off->notes[0];
  auto no_cb = Parse({"exp_manager.create_checkpoint_callback=False"});
  ASSERT_TRUE(no_cb.ok());
  EXPECT_FALSE(no_cb->checkpoint.enabled);
  // hypertrain's flat names are the same keys: they must agree.
  auto same = Parse({"exp_manager.every_n_train_steps=10", cb + "every_n_train_steps=10"});
  EXPECT_TRUE(same.ok());
  ExpectError({"exp_manager.every_n_train_steps=5", cb + "every_n_train_steps=10"},
              "exp_manager.every_n_train_steps (5) and exp_manager.checkpoint_callback_params.every_n_train_steps "
              "(10) disagree; give one");
  ExpectError({cb + "monitor=val_loss"},
              cb + "monitor: val_loss: checkpoints are ranked by step only; supported: step (with mode: max: the "
                   "newest save_top_k are kept)");
  ExpectError({cb + "mode=min"}, cb + "mode: min: with monitor: step the newest checkpoints are kept; supported: max");
  ExpectError({cb + "save_top_k=-2"},
              cb + "save_top_k: -2 must be >= 1, -1 (keep all) or 0 (no sharded checkpoints)");
}

TEST(RecipeKeys, ExportFullModelAndAutoCheckpoint) {
  auto c = Parse({"exp_manager.exp_dir=/e", "exp_manager.export_full_model.every_n_train_steps=5",
                  "exp_manager.export_full_model.save_last=True"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->checkpoint.export_every_n_train_steps, 5);
  EXPECT_TRUE(c->checkpoint.export_save_last);
  EXPECT_EQ(c->checkpoint.export_dir, "/e/checkpoints/full");
  auto a = Parse({"exp_manager.auto_checkpoint.enabled=True", "exp_manager.every_n_train_steps=10"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->checkpoint.auto_interval);
  EXPECT_EQ(a->checkpoint.every_n_train_steps, 0);  // the measured interval replaces the fixed one
  ASSERT_FALSE(a->notes.empty());
  ExpectError({"exp_manager.auto_checkpoint.enabled=True", "exp_manager.checkpoint_callback_params.save_top_k=0"},
              "exp_manager.auto_checkpoint.enabled: true but exp_manager.checkpoint_callback_params.save_top_k: 0 "
              "turns sharded checkpoints off");
}

// model.peft.fp8_base (issue 36): a hypertrain key beside the recipe's peft
// block; LoRA or QLoRA in bf16 on the CUDA backend only.
TEST(RecipeKeys, PeftFp8Base) {
  const std::vector<std::string> lora = {"model.do_finetune=True", "model.hf_model_name_or_path=/m",
                                         "model.peft.peft_type=lora"};
  auto off = Parse(lora);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->finetune.peft.fp8_base);
  std::vector<std::string> on = lora;
  on.push_back("model.peft.fp8_base=true");
  on.push_back("trainer.precision=bf16");
  auto c = Parse(on);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->finetune.peft.fp8_base);
  EXPECT_NE(c->finetune.peft.Summary().find("frozen base in FP8"), std::string::npos);
  std::vector<std::string> qlora = on;
  qlora[2] = "model.peft.peft_type=qlora";
  auto q = Parse(qlora);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_NE(q->finetune.peft.Summary().find("NF4 dequantised to e4m3"), std::string::npos);
  std::vector<std::string> fp32 = on;
  fp32.back() = "trainer.precision=fp32";
  ExpectError(fp32, "model.peft.fp8_base: FP8 GEMMs run inside bf16 training; trainer.precision is fp32 (use bf16)");
  std::vector<std::string> cpu = on;
  cpu.push_back("trainer.backend=cpu");
  ExpectError(cpu, "model.peft.fp8_base needs the CUDA backend (FP8 tensor cores); trainer.backend is cpu");
}

TEST(RecipeKeys, FinetuneFromAHuggingFaceDirectory) {
  auto c = Parse({"model.do_finetune=True", "model.hf_model_name_or_path=/models/llama"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->finetune.do_finetune);
  EXPECT_EQ(c->finetune.hf_model_name_or_path, "/models/llama");
  auto pre = Parse({"model.do_finetune=False", "model.hf_model_name_or_path=null", "model.peft.peft_type=null"});
  EXPECT_TRUE(pre.ok()) << pre.status().ToString();
  // The LoRA recipe's peft block (runtime/model/peft.h; docs/PEFT.md).
  auto lora = Parse({"model.do_finetune=True", "model.hf_model_name_or_path=/models/llama", "model.peft.peft_type=lora",
                     "model.peft.rank=32", "model.peft.alpha=16", "model.peft.dropout=0.1",
                     "model.peft.target_modules=q_proj,v_proj"});
  ASSERT_TRUE(lora.ok()) << lora.status().ToString();
  EXPECT_EQ(lora->finetune.peft.type, model::PeftType::kLora);
  EXPECT_EQ(lora->finetune.peft.rank, 32);
  EXPECT_DOUBLE_EQ(lora->finetune.peft.alpha, 16);
  EXPECT_DOUBLE_EQ(lora->finetune.peft.dropout, 0.1);
  EXPECT_EQ(lora->finetune.peft.targets.size(), 2u);
  EXPECT_FALSE(lora->finetune.adapter_dir.empty());
  ExpectError({"model.peft.peft_type=adapter"}, "model.peft.peft_type: 'adapter' is not one of lora, qlora, none");
  ExpectError({"model.do_finetune=True", "model.hf_model_name_or_path=/m", "model.peft.peft_type=lora",
               "model.peft.target_modules=w_proj"},
              "model.peft.target_modules: 'w_proj' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, "
              "up_proj, down_proj");
  ExpectError({"model.do_finetune=True"},
              "model.do_finetune: true needs model.hf_model_name_or_path (a local Hugging Face model directory "
              "with config.json and *.safetensors)");
  ExpectError({"model.hf_model_name_or_path=/m"},
              "model.hf_model_name_or_path: '/m' is set but model.do_finetune is false: set model.do_finetune: "
              "true to start from these weights, or remove the path");
}

TEST(RecipeKeys, Validation) {
  auto c = Parse({"model.data.val_dir=/val", "trainer.val_check_interval=5", "trainer.limit_val_batches=4",
                  "model.val_batch_size=2"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->validation.enabled());
  EXPECT_EQ(c->validation.check_interval, 5);
  EXPECT_EQ(c->validation.limit_batches, 4);
  EXPECT_EQ(c->validation.batch_size, 2);
  auto off = Parse({"model.data.val_dir=/val", "trainer.limit_val_batches=0", "trainer.val_check_interval=1"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->validation.enabled());  // the recipes' "0 = disable"
  ExpectError({"trainer.limit_val_batches=-1"}, "trainer.limit_val_batches: -1 must be >= 0 (0 = off)");
  ExpectError({"trainer.limit_val_batches=2", "trainer.val_check_interval=1"},
              "trainer.limit_val_batches: 2 asks for validation but model.data.val_dir is not set (set it, or 0 = "
              "off)");
  ExpectError({"model.data.val_dir=/val", "trainer.limit_val_batches=2"},
              "trainer.val_check_interval: 0 with validation on (model.data.val_dir, trainer.limit_val_batches > 0): "
              "give the steps between evaluations");
  // Lightning reads a float as a fraction (of an epoch, of the validation
  // set): refused saying so, 1.0 included; a non-number stays a type error.
  ExpectError({"trainer.val_check_interval=0.5"},
              "trainer.val_check_interval: 0.5 is a fraction (Lightning: of an epoch); fractions are not supported: "
              "give a whole number of optimizer steps");
  ExpectError({"trainer.limit_val_batches=1.0"},
              "trainer.limit_val_batches: 1.0 is a fraction (Lightning: of the validation set); fractions are not "
              "supported: give a whole number of batches");
  ExpectError({"trainer.limit_val_batches=2.5e-1"},
              "trainer.limit_val_batches: 2.5e-1 is a fraction (Lightning: of the validation set); fractions are not "
              "supported: give a whole number of batches");
  ExpectError({"trainer.val_check_interval=often"}, "trainer.val_check_interval: 'often' is not an integer");
}

// Issue 40: a recipe that spells out its architecture without model.shape and
// without tie_word_embeddings gets Hugging Face's default (untied); a named
// shape keeps its own; an explicit value always wins.
TEST(RecipeKeys, TieWordEmbeddingsDefaultsToHuggingFacesForRecipes) {
  auto recipe = Parse({"model.hidden_size=256", "model.num_hidden_layers=2"});
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  EXPECT_FALSE(recipe->model.tie_word_embeddings);
  auto tied = Parse({"model.hidden_size=256", "model.tie_word_embeddings=true"});
  ASSERT_TRUE(tied.ok());
  EXPECT_TRUE(tied->model.tie_word_embeddings);
  auto named = Parse({"model.shape=1b", "model.num_hidden_layers=2"});
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->model.tie_word_embeddings);  // Llama-3.2-1B ties
  auto bare = Parse({});
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->model.tie_word_embeddings);  // the implicit tiny shape
}

TEST(RecipeKeys, SyntheticDataWithATrainDirSaysWhichWins) {
  auto c = Parse({"model.data.train_dir=/data/tokens"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->data.use_synthetic_data);
  bool said = false;
  for (const std::string& n : c->notes) {
    said = said || n == "model.data.use_synthetic_data: true wins over model.data.train_dir (/data/tokens): "
                        "training on synthetic data, the directory is not read";
  }
  EXPECT_TRUE(said) << testing::PrintToString(c->notes);
}

TEST(RecipeKeys, WhatCannotBeHonouredIsAnErrorNamingKeyValueAndWhatIsSupported) {
  ExpectError({"model.tensor_model_parallel_degree=2"},
              "model.tensor_model_parallel_degree: 2: hypertrain does not do tensor parallelism; supported: 1 "
              "(hybrid-sharded data parallelism: model.sharding_strategy, model.shard_degree)");
  ExpectError({"model.context_parallel_degree=4"},
              "model.context_parallel_degree: 4: hypertrain does not do context parallelism; supported: 1 "
              "(hybrid-sharded data parallelism: model.sharding_strategy, model.shard_degree)");
  ExpectError({"model.expert_model_parallel_degree=8"},
              "model.expert_model_parallel_degree: 8: hypertrain does not do expert parallelism; supported: 1 "
              "(hybrid-sharded data parallelism: model.sharding_strategy, model.shard_degree)");
  ExpectError({"model.moe=True"}, "model.moe: true: mixture-of-experts layers are not implemented; supported: false "
                                  "(dense Llama)");
  ExpectError({"model.offload_activations=True"},
              "model.offload_activations: true: activation offloading to host memory is not implemented; "
              "supported: false (reduce memory with model.activation_checkpointing)");
  ExpectError({"model.data.dataset_type=gpt"},
              "model.data.dataset_type: gpt: no loader for it; supported: hf (a pre-tokenized save_to_disk "
              "dataset), hypertrain (`hypertrain prepare` shards), megatron (*.idx/*.bin)");
  ExpectError({"model.initializer_range=0.01"},
              "model.initializer_range: 0.01: weights are initialised from N(0, 0.02) (runtime/model/init.h); "
              "supported: 0.02");
  ExpectError({"model.model_type=mistral"},
              "model.model_type: mistral: hypertrain trains Llama models; supported: llama_v3, llama_v2, llama");
  // Degree 1, moe false, ... are accepted; so is the launcher's bookkeeping.
  auto ok = Parse({"model.tensor_model_parallel_degree=1", "model.moe=False", "model.offload_activations=False",
                   "run.name=x", "use_smp_model=True", "distributed_backend=nccl", "model.delayed_param=True",
                   "model.forward_prefetch=True", "model.use_flash_attention=True", "trainer.accelerator=gpu"});
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(RecipeKeys, LrDecayItersAndConstantSteps) {
  auto c = Parse({"trainer.max_steps=100", "model.lr_decay_iters=80", "model.optim.sched.constant_steps=10"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->optim.DecayEnd(c->max_steps), 70);
  auto d = Parse({"trainer.max_steps=100"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->optim.DecayEnd(d->max_steps), 100);
}

TEST(RecipeKeys, UnknownKeysAreErrorsWithSuggestionsUnlessWarn) {
  ExpectError({"model.hiden_size=64"},
              "--set: unknown key model.hiden_size (did you mean model.hidden_size?); set "
              "hypertrain.unknown_keys: warn to run anyway");
  ExpectError({"trainer.seed=1"},
              "--set: unknown key trainer.seed (did you mean model.seed?); set hypertrain.unknown_keys: warn to run "
              "anyway");
  ExpectError({"exp_manager.checkpoint_callback_params.every_n_train_step=5"},
              "--set: unknown key exp_manager.checkpoint_callback_params.every_n_train_step (did you mean "
              "exp_manager.checkpoint_callback_params.every_n_train_steps?); set hypertrain.unknown_keys: warn to "
              "run anyway");
  ExpectError({"zzz=1"}, "--set: unknown key zzz; set hypertrain.unknown_keys: warn to run anyway");
  auto w = Parse({"model.hiden_size=64", "hypertrain.unknown_keys=warn"});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->unknown_keys, std::vector<std::string>{"model.hiden_size (did you mean model.hidden_size?)"});
  ExpectError({"hypertrain.unknown_keys=ignore"}, "hypertrain.unknown_keys: 'ignore' is not one of error, warn");
}

TEST(RecipeKeys, EnvironmentOverridesMapToKeysInOnePlace) {
  std::map<std::string, std::string> vars = {{"HT_REDUCE_DTYPE", "bf16"},   {"HT_SPLIT_EMBEDDING_GRAD", "0"},
                                             {"HT_REPLICA_REDUCE", "after"}, {"HT_RENDEZVOUS_TIMEOUT_S", "30"},
                                             {"HT_GLOO_HOSTNAME", "127.0.0.1"}, {"HT_CUDA_GRAPHS", "1"},
                                             {"HT_NCCL_REPLICA_MAX_CTAS", "4"}, {"HT_NCCL_SHARD_PRIORITY", "low"}};
  const EnvLookup env = [&vars](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  auto c = Parse({}, env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->distributed.reduce_dtype, ReduceDtype::kBf16);
  EXPECT_FALSE(c->distributed.split_embedding_grad);
  EXPECT_EQ(c->distributed.replica_reduce, "after");
  EXPECT_EQ(c->distributed.rendezvous_timeout_s, 30);
  EXPECT_EQ(c->distributed.gloo_hostname, "127.0.0.1");
  EXPECT_TRUE(c->cuda.cuda_graphs);
  EXPECT_EQ(c->distributed.nccl_replica.max_ctas, 4);
  EXPECT_EQ(c->distributed.nccl_shard.priority, "low");
  EXPECT_EQ(c->distributed.nccl_world.priority, "high");
  EXPECT_EQ(c->notes.size(), vars.size());  // each override is logged
  // --set wins over the environment.
  auto set = Parse({"distributed.reduce_dtype=fp32"}, env);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->distributed.reduce_dtype, ReduceDtype::kFp32);
  vars = {{"HT_REDUCE_DTYPE", "fp16"}};
  auto bad = Parse({}, env);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "distributed.reduce_dtype: 'fp16' is not one of fp32, bf16");
  vars = {{"HT_NCCL_SHARD_MAX_CTAS", "8x"}};
  auto bad_ctas = Parse({}, env);
  ASSERT_FALSE(bad_ctas.ok());
  EXPECT_EQ(bad_ctas.status().message(), "distributed.nccl.shard.max_ctas: '8x' is not an integer");
  vars = {{"HT_NCCL_REPLICA_MAX_CTAS", "65"}};
  EXPECT_FALSE(Parse({}, env).ok());
  vars = {{"HT_NCCL_REPLICA_PRIORITY", "urgent"}};
  auto bad_prio = Parse({}, env);
  ASSERT_FALSE(bad_prio.ok());
  EXPECT_EQ(bad_prio.status().message(), "distributed.nccl.replica.priority: 'urgent' is not one of high, low");
  // Every variable names a key the config reads.
  for (const EnvOverride& e : EnvOverrides()) {
    auto k = Parse({std::string(e.key) + "=null"});
    EXPECT_TRUE(k.ok()) << e.var << " -> " << e.key << ": " << k.status().ToString();
  }
}

// The kernels' knobs: keys in the cuda section, each with its HT_* variable
// (tools/gpu_bench_sweep.sh and cudnn_gpu_check.sh set them); bad values are
// config errors naming the key and the value, from a file, --set or the env.
TEST(RecipeKeys, CudaKernelKnobsAreKeysWithEnvOverrides) {
  auto d = Parse({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->cuda.attention_impl, AttentionImpl::kAuto);
  EXPECT_EQ(d->cuda.gemm_autotune, "on");
  EXPECT_EQ(d->cuda.cudnn_bwd_workspace_mb, 2048);
  std::map<std::string, std::string> vars = {
      {"HT_ATTENTION_IMPL", "cudnn-fast"}, {"HT_GEMM_AUTOTUNE", "0"}, {"HT_CUDNN_BWD_WORKSPACE_MB", "256"}};
  const EnvLookup env = [&vars](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  auto c = Parse({}, env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cuda.attention_impl, AttentionImpl::kCudnnFast);
  EXPECT_EQ(c->cuda.gemm_autotune, "off");  // the scripts' 0 reads as off
  EXPECT_EQ(c->cuda.cudnn_bwd_workspace_mb, 256);
  EXPECT_EQ(c->notes.size(), vars.size());
  const std::string described = DescribeConfig(*c);
  EXPECT_NE(described.find("attention_impl: cudnn-fast"), std::string::npos) << described;
  // The same mapping without a config file (hypertrain bench).
  auto from_env = CudaConfigFromEnv(env);
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(from_env->attention_impl, AttentionImpl::kCudnnFast);
  EXPECT_EQ(from_env->gemm_autotune, "off");
  EXPECT_EQ(from_env->cudnn_bwd_workspace_mb, 256);
  // A file's keys (YAML on/off stay words), and --set over the environment.
  auto set = Parse({"cuda.gemm_autotune=verbose", "cuda.attention_impl=tiled"}, env);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->cuda.gemm_autotune, "verbose");
  EXPECT_EQ(set->cuda.attention_impl, AttentionImpl::kTiled);
  auto yaml_off = ParseTrainConfig(std::string(kBase) + "cuda:\n  gemm_autotune: off\n", {}, "t.yaml");
  ASSERT_TRUE(yaml_off.ok()) << yaml_off.status().ToString();
  EXPECT_EQ(yaml_off->cuda.gemm_autotune, "off");

  const std::pair<std::map<std::string, std::string>, std::string> bad[] = {
      {{{"HT_ATTENTION_IMPL", "flash"}},
       "cuda.attention_impl: 'flash' is not one of auto, cudnn, cudnn-fast, cudnn-fwd, tiled, simple"},
      {{{"HT_GEMM_AUTOTUNE", "2"}}, "cuda.gemm_autotune: '2' is not one of on, off, verbose"},
      {{{"HT_CUDNN_BWD_WORKSPACE_MB", "0"}},
       "cuda.cudnn_bwd_workspace_mb: 0 must be between 1 and 1048576 (MiB)"},
      {{{"HT_CUDNN_BWD_WORKSPACE_MB", "2g"}}, "cuda.cudnn_bwd_workspace_mb: '2g' is not an integer"},
  };
  for (const auto& [v, message] : bad) {
    vars = v;
    auto p = Parse({}, env);
    ASSERT_FALSE(p.ok()) << message;
    EXPECT_EQ(p.status().message(), message);
    auto e = CudaConfigFromEnv(env);
    ASSERT_FALSE(e.ok()) << message;
    EXPECT_EQ(e.status().message(), message);
  }
  auto neg = Parse({"cuda.cudnn_bwd_workspace_mb=-5"});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "cuda.cudnn_bwd_workspace_mb: -5 must be between 1 and 1048576 (MiB)");
}

TEST(RecipeKeys, DescribeConfigPrintsWhatWillRun) {
  auto c = Parse({"model.shape=1b", "model.activation_checkpointing=True", "exp_manager.exp_dir=/e",
                  "exp_manager.checkpoint_callback_params.save_top_k=0", "model.hf_access_token=secret-token"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string d = DescribeConfig(*c);
  EXPECT_NE(d.find("hidden_size: 2048"), std::string::npos) << d;
  EXPECT_NE(d.find("activation_checkpointing: full"), std::string::npos) << d;
  EXPECT_NE(d.find("checkpoint_dir: /e/checkpoints"), std::string::npos) << d;
  EXPECT_NE(d.find("sharded_checkpoints: false"), std::string::npos) << d;
  EXPECT_EQ(d.find("secret-token"), std::string::npos) << "tokens never printed";
  // What it prints parses back as YAML.
  EXPECT_NO_THROW(YAML::Load(d));
}

TEST(RecipeKeys, DescribeConfigPrintsPeftAndFinetune) {
  auto c = Parse({"model.do_finetune=True", "model.hf_model_name_or_path=/models/llama", "model.peft.peft_type=lora",
                  "model.peft.r=32", "model.peft.lora_alpha=16", "model.peft.lora_dropout=0.05",
                  "model.peft.target_modules=[v_proj, q_proj, down_proj]", "exp_manager.exp_dir=/e",
                  "trainer.profile.start_step=3", "trainer.profile.num_steps=2"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string d = DescribeConfig(*c);
  const YAML::Node y = YAML::Load(d);
  const YAML::Node m = y["model"];
  EXPECT_TRUE(m["do_finetune"].as<bool>()) << d;
  EXPECT_EQ(m["hf_model_name_or_path"].as<std::string>(), "/models/llama") << d;
  // PEFT's own spellings (r, lora_alpha, lora_dropout) print under the recipe names.
  const YAML::Node p = m["peft"];
  EXPECT_EQ(p["peft_type"].as<std::string>(), "lora") << d;
  EXPECT_EQ(p["rank"].as<int>(), 32) << d;
  EXPECT_DOUBLE_EQ(p["alpha"].as<double>(), 16) << d;
  EXPECT_DOUBLE_EQ(p["dropout"].as<double>(), 0.05) << d;
  // The resolved targets: in block order, whatever order the config gave.
  EXPECT_EQ(p["target_modules"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}))
      << d;
  EXPECT_EQ(y["exp_manager"]["adapter_dir"].as<std::string>(), "/e/adapter") << d;
  EXPECT_EQ(y["trainer"]["profile"]["start_step"].as<int>(), 3) << d;
  EXPECT_EQ(y["trainer"]["profile"]["num_steps"].as<int>(), 2) << d;

  // What it prints for PEFT parses back to the same options.
  std::vector<std::string> sets = {"model.do_finetune=True", "model.hf_model_name_or_path=/models/llama"};
  for (const char* k : {"peft_type", "rank", "alpha", "dropout"}) {
    sets.push_back(std::string("model.peft.") + k + "=" + p[k].as<std::string>());
  }
  YAML::Emitter targets;
  targets << YAML::Flow << p["target_modules"];
  sets.push_back(std::string("model.peft.target_modules=") + targets.c_str());
  auto again = Parse(sets);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->finetune.peft.Summary(), c->finetune.peft.Summary());
  EXPECT_EQ(again->finetune.peft.targets, c->finetune.peft.targets);

  // Without PEFT: only the type.
  auto plain = Parse({});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const YAML::Node q = YAML::Load(DescribeConfig(*plain))["model"]["peft"];
  EXPECT_EQ(q["peft_type"].as<std::string>(), "none");
  EXPECT_FALSE(q["rank"]);
}

}  // namespace
}  // namespace hypertrain::config
