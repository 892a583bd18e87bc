#pragma once
// TrainConfig: the job YAML (HyperPod recipe layout) plus --set overrides,
// resolved (Hydra/OmegaConf interpolation, runtime/config/resolve.h),
// validated and typed before any work starts. Components receive the typed
// sections below and never read YAML themselves.
//
//   trainer:     {max_steps, precision, log_every_n_steps, backend, peak_tflops,
//                 val_check_interval, limit_val_batches, cuda_graphs, ...}
//   model:       {shape, <ModelConfig fields>, train_batch_size, val_batch_size,
//                 grad_accumulation_steps, grad_clip, activation_checkpointing,
//                 sharding_strategy, shard_degree, seed, fp8*, do_finetune,
//                 hf_model_name_or_path, peft.*, optim.*, data.*}
//   exp_manager: {exp_dir, checkpoint_dir, checkpoint_callback_params.*,
//                 export_full_model.*, auto_checkpoint.*, checkpoint.*, ...}
//   distributed: {rendezvous_timeout_s, reduce_dtype, replica_reduce, nccl.*, ...}
//   cuda:        {attention_impl, gemm_autotune, cudnn_bwd_workspace_mb}
// docs/TRAINER.md lists every key with its default and the recipes using it.
//
// Errors (InvalidArgument) name the key, the value and what is accepted, e.g.
// "model.activation_checkpointing: 'partial' is not one of none, selective,
// full, true, false". A key hypertrain cannot honour (tensor parallelism,
// MoE, ...) is such an error; a key nothing knows is an error with a "did you
// mean" suggestion unless `hypertrain.unknown_keys: warn`.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "contract/sharding.h"
#include "core/status.h"
#include "runtime/config/options.h"
#include "runtime/config/resolve.h"
#include "runtime/model/backend.h"
#include "runtime/model/config.h"
#include "runtime/model/fp8.h"

namespace hypertrain::config {

struct OptimConfig {
  std::string name = "adamw";
  double lr = 3e-4;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  ScheduleKind sched = ScheduleKind::kCosine;
  int64_t warmup_steps = 0;
  int64_t constant_steps = 0;  // sched.constant_steps: held at min_lr at the end
  int64_t decay_steps = 0;     // model.lr_decay_iters: the decay horizon; 0 = max_steps
  double min_lr = 0.0;
  // The step at which the decay reaches min_lr.
  int64_t DecayEnd(int64_t max_steps) const {
    const int64_t horizon = (decay_steps > 0 ? decay_steps : max_steps) - constant_steps;
    return horizon > warmup_steps ? horizon : warmup_steps + 1;
  }
};

struct DataConfig {
  std::string train_dir;
  bool use_synthetic_data = false;
  // The model's tokenizer (a directory with tokenizer.json): data whose
  // manifest names another tokenizer is refused. Empty: vocab checked only.
  std::string tokenizer;
  int prefetch_depth = 2;
};

// Fine-tuning from Hugging Face weights and PEFT (docs/PEFT.md). The HyperPod
// recipe keys model.do_finetune, model.hf_model_name_or_path and model.peft.*,
// read in one block of ParseTrainConfig.
struct FinetuneConfig {
  bool do_finetune = false;
  // A local Hugging Face model directory (config.json + *.safetensors): the
  // initial weights, or with PEFT the frozen base. Only with do_finetune.
  std::string hf_model_name_or_path;
  model::PeftOptions peft;  // model.peft.{peft_type, rank, alpha, dropout, target_modules}
  // Where the trained adapter is written at the end (PEFT's
  // adapter_config.json + adapter_model.safetensors): exp_manager.adapter_dir,
  // default <exp_dir>/adapter.
  std::string adapter_dir;
};

// Held-out evaluation (model.data.val_dir, trainer.val_check_interval,
// trainer.limit_val_batches, model.val_batch_size).
struct ValidationConfig {
  std::string val_dir;           // "" = no validation
  int64_t check_interval = 0;    // optimizer steps between evaluations (and at the end)
  int64_t limit_batches = 0;     // batches per evaluation per rank; 0 = off
  int64_t batch_size = 1;        // sequences per batch
  bool enabled() const { return !val_dir.empty() && limit_batches > 0 && check_interval > 0; }
};

// Checkpointing and export options beyond the flat exp_manager fields of
// TrainConfig (checkpoint_dir, resume_from_checkpoint, save_top_k, start_fresh).
struct CheckpointConfig {
  // false: no sharded checkpoints (checkpoint_callback_params.save_top_k: 0 or
  // create_checkpoint_callback: false); `disabled_by` names the key.
  bool enabled = true;
  std::string disabled_by;
  // The fixed save interval, 0 = off: exp_manager.every_n_train_steps (or
  // checkpoint_callback_params.every_n_train_steps) and every_n_minutes.
  int64_t every_n_train_steps = 0;
  double every_n_minutes = 0;
  bool save_last = true;  // a final sharded save at the end
  bool async_save = true;
  FailurePolicy failure_policy = FailurePolicy::kStop;
  bool verify_checksums = true;
  double coordinator_timeout_s = 600;
  std::string hf_init_from;  // exp_manager.hf_init_from (without do_finetune)
  // exp_manager.export_full_model: HF weights into <export_dir>/step-<N>.
  int64_t export_every_n_train_steps = 0;  // 0 = off
  bool export_save_last = false;           // once at the end
  std::string export_dir;                  // default <checkpoint_dir>/full
  // exp_manager.checkpoint.export_hf_dir: the final weights, one fixed dir.
  std::string export_hf_dir;
  std::string export_dtype = "bf16";  // bf16 | fp32 (both exports)
  // exp_manager.auto_checkpoint: the interval from measured save stall and
  // step time (docs/CHECKPOINTS.md).
  bool auto_interval = false;
  double auto_max_overhead = 0.02;       // save stall / training time
  double auto_max_lost_minutes = 30;     // work lost to a crash
  double auto_min_interval_s = 60;       // never more often
};

// Distributed knobs (runtime/parallel); each has an HT_* override.
struct DistributedConfig {
  double rendezvous_timeout_s = 300;
  std::string gloo_hostname;
  ReduceDtype reduce_dtype = ReduceDtype::kFp32;  // gradient reduce-scatter
  bool split_embedding_grad = true;
  std::string replica_reduce = "overlap";  // overlap | after
  // NCCL communicators by group kind: distributed.nccl.<kind>.{max_ctas
  // (0 = NCCL's default, else 1..64), priority (high | low)}.
  struct NcclKind {
    int64_t max_ctas = 0;
    std::string priority = "high";
  };
  NcclKind nccl_shard, nccl_replica, nccl_world;
};

// CUDA backend knobs; each has an HT_* override (EnvOverrides). The kernels
// get them as parameters (runtime/kernels/cuda: AttentionParams, Gemm::Create).
struct CudaConfig {
  bool cuda_graphs = false;  // trainer.cuda_graphs
  AttentionImpl attention_impl = AttentionImpl::kAuto;  // cuda.attention_impl
  // cuda.gemm_autotune: on | off | verbose (0 and 1 read as off and on)
  std::string gemm_autotune = "on";
  // cuda.cudnn_bwd_workspace_mb: cap of one deterministic cuDNN attention
  // backward call's workspace (MiB, > 0); the batch runs in chunks beyond it.
  int64_t cudnn_bwd_workspace_mb = 2048;
};

// The values cuda.gemm_autotune accepts (cuda.attention_impl's: options.h).
const std::vector<std::string>& GemmAutotuneNames();

// trainer.profile: trace steps (start_step, start_step + num_steps] of a run
// (runtime/trace). num_steps 0 = off. A run resumed past start_step traces
// its first num_steps steps.
struct ProfileConfig {
  int64_t start_step = 0;
  int64_t num_steps = 0;
  std::string dir;  // "" = <exp_dir>/traces[/attempt-<RESTART_ATTEMPT>]
  bool enabled() const { return num_steps > 0; }
};

struct TrainConfig {
  // trainer:
  int64_t max_steps = 100;
  model::Precision precision = model::Precision::kBF16;
  int64_t log_every_n_steps = 10;
  // Bitwise-reproducible training (same seed, same losses); false allows
  // faster non-reproducible kernels (as PyTorch's default SDPA backward).
  bool deterministic = true;
  std::string backend = "auto";  // auto | cpu | cuda
  double peak_tflops = 0;        // 0: the backend's figure for its device
  int64_t devices = 1;           // per node (HyperPod trainer.devices)
  int64_t num_nodes = 1;
  LossScalerOptions loss_scale;  // enabled iff precision == fp16
  ProfileConfig profile;
  // model:
  std::string shape;  // named base shape the explicit fields override
  model::ModelConfig model;
  int64_t train_batch_size = 1;         // sequences per rank per micro-batch
  int64_t grad_accumulation_steps = 1;  // micro-batches per optimizer step
  // An elastic job on another node count than its config's (contract/elastic.h,
  // cmd::SizeForThisWorld): the config's own grad_accumulation_steps, which the
  // checkpoint's config hash keeps; 0 when the job runs at its desired size.
  int64_t desired_grad_accumulation_steps = 0;
  double grad_clip = 1.0;               // global-norm clip; 0 = off
  model::ActivationCheckpointing activation_checkpointing = model::ActivationCheckpointing::kNone;
  contract::ShardingStrategy sharding_strategy = contract::kDefaultShardingStrategy;
  int64_t shard_degree = 0;  // 0 = ranks of one node
  double collective_timeout_s = 600;
  uint64_t seed = 1234;
  model::Fp8Options fp8;  // model.fp8* (runtime/model/fp8.h)
  FinetuneConfig finetune;
  OptimConfig optim;
  DataConfig data;
  ValidationConfig validation;
  CheckpointConfig checkpoint;
  DistributedConfig distributed;
  CudaConfig cuda;
  // exp_manager:
  std::string exp_dir = "./exp";
  bool tensorboard = true;     // exp_manager.create_tensorboard_logger
  std::string checkpoint_dir;  // default exp_dir/checkpoints
  std::string resume_from_checkpoint;
  int64_t save_top_k = 2;  // newest k kept; -1 keeps all; 0 = no sharded checkpoints
  bool start_fresh = false;

  // Keys nothing knows, kept only with hypertrain.unknown_keys: warn (for one
  // warning); each with its suggestion, e.g. "model.hiden_size (did you mean
  // model.hidden_size?)".
  std::vector<std::string> unknown_keys;
  // Notes for the start-up log: which environment overrides applied, what a
  // recipe key turned off.
  std::vector<std::string> notes;

  int64_t seq_len() const { return model.max_context_width; }
};

// Parses YAML text, applies overrides ("a.b.c=value", value parsed as YAML),
// resolves interpolations, applies the HT_* environment overrides
// (env_overrides.h; `env` may be null: none), validates. `source` names the
// text in error messages.
StatusOr<TrainConfig> ParseTrainConfig(const std::string& yaml_text,
                                       const std::vector<std::string>& overrides,
                                       const std::string& source = "<config>",
                                       const EnvLookup& env = nullptr);
StatusOr<TrainConfig> LoadTrainConfig(const std::string& path,
                                      const std::vector<std::string>& overrides,
                                      const EnvLookup& env = nullptr);

// The HT_* environment variables: each overrides one config key (applied
// after the file, before --set), the one place they are read for the trainer.
struct EnvOverride {
  const char* var;
  const char* key;
};
const std::vector<EnvOverride>& EnvOverrides();

// The CUDA knobs from the HT_* environment overrides alone (defaults
// elsewhere), validated as in ParseTrainConfig: for tools without a config
// file (`hypertrain bench`). InvalidArgument naming the variable's key and value.
StatusOr<CudaConfig> CudaConfigFromEnv(const EnvLookup& env);

// The resolved, typed config as YAML (what `hypertrain config` prints and the
// trainer logs at start): every key with the value that will run.
std::string DescribeConfig(const TrainConfig& c);

// Where a `hypertrain train` run's config comes from, in the pod contract's
// terms (contract/env.h): the file is --config, else $HYPERTRAIN_CONFIG (the
// operator mounts the job's config there); $HYPERTRAIN_CHECKPOINT_DIR, when
// set, becomes exp_manager.checkpoint_dir (the TrainingJob's checkpointDir wins
// over the file); $HYPERTRAIN_PROFILE (contract/profile.h) becomes
// trainer.profile.*; the --set overrides come last and win over all.
struct RunConfigSource {
  std::string path;
  std::vector<std::string> overrides;  // for LoadTrainConfig
};
// InvalidArgument when there is no config path at all.
StatusOr<RunConfigSource> ResolveRunConfig(const std::string& config_flag, const std::vector<std::string>& set_flags,
                                           const EnvLookup& env);

}  // namespace hypertrain::config
