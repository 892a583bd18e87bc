#pragma once
// TrainConfig: the job YAML (HyperPod recipe layout) plus --set overrides,
// validated before any work starts.
//
//   trainer:     {max_steps, precision, log_every_n_steps, backend, peak_tflops, ...}
//   model:       {shape, <ModelConfig fields>, train_batch_size,
//                 grad_accumulation_steps, grad_clip, activation_checkpointing,
//                 sharding_strategy, shard_degree, seed,
//                 fp8, fp8_recipe, fp8_amax_history_len, fp8_amax_compute_algo,
//                 fp8_margin, fp8_grad_format, fp8_lm_head,
//                 optim: {name, lr, weight_decay, betas, eps,
//                         sched: {name, warmup_steps, min_lr}},
//                 data: {train_dir, use_synthetic_data, prefetch_depth}}
//   exp_manager: {exp_dir, checkpoint_dir, ...}
// docs/TRAINER.md lists every key with its default.
//
// Errors (InvalidArgument) name the key and the accepted values, e.g.
// "model.activation_checkpointing: 'partial' is not one of none, selective,
// full". Keys nobody reads are collected in unknown_keys for ONE warning.
// Other components read their own keys from `raw` and list them in
// kExtraKnownKeys (config.cc) so they are not reported as unknown.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/model/backend.h"
#include "runtime/model/config.h"
#include "runtime/model/fp8.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/loss_scaler.h"

namespace hypertrain::config {

struct OptimConfig {
  std::string name = "adamw";
  double lr = 3e-4;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  train::ScheduleKind sched = train::ScheduleKind::kCosine;
  int64_t warmup_steps = 0;
  double min_lr = 0.0;
};

struct DataConfig {
  std::string train_dir;
  bool use_synthetic_data = false;
  // The model's tokenizer (a directory with tokenizer.json): data whose
  // manifest names another tokenizer is refused. Empty: vocab checked only.
  std::string tokenizer;
  int prefetch_depth = 2;
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
  train::LossScalerOptions loss_scale;  // enabled iff precision == fp16
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
  std::string sharding_strategy = "hybrid_shard";  // one of contract/sharding.h
  int64_t shard_degree = 0;  // 0 = ranks of one node
  double collective_timeout_s = 600;
  uint64_t seed = 1234;
  model::Fp8Options fp8;  // model.fp8* (runtime/model/fp8.h)
  OptimConfig optim;
  DataConfig data;
  // exp_manager:
  std::string exp_dir = "./exp";
  std::string checkpoint_dir;  // default exp_dir/checkpoints
  std::string resume_from_checkpoint;
  int64_t every_n_train_steps = 0;
  double every_n_minutes = 0;
  int64_t save_top_k = 2;
  bool start_fresh = false;

  YAML::Node raw;                        // the merged document
  std::vector<std::string> unknown_keys;  // for one warning

  int64_t seq_len() const { return model.max_context_width; }
};

// Parses YAML text, applies overrides ("a.b.c=value", value parsed as YAML),
// validates. `source` names the text in error messages.
StatusOr<TrainConfig> ParseTrainConfig(const std::string& yaml_text,
                                       const std::vector<std::string>& overrides,
                                       const std::string& source = "<config>");
StatusOr<TrainConfig> LoadTrainConfig(const std::string& path,
                                      const std::vector<std::string>& overrides);

// Reads one environment variable; nullptr when unset (tests pass their own).
using EnvLookup = std::function<const char*(const char*)>;

// Where a `hypertrain train` run's config comes from, in the pod contract's
// terms (contract/env.h): the file is --config, else $HYPERTRAIN_CONFIG (the
// operator mounts the job's config there); $HYPERTRAIN_CHECKPOINT_DIR, when
// set, becomes exp_manager.checkpoint_dir (the TrainingJob's checkpointDir wins
// over the file); the --set overrides come last and win over both.
struct RunConfigSource {
  std::string path;
  std::vector<std::string> overrides;  // for LoadTrainConfig
};
// InvalidArgument when there is no config path at all.
StatusOr<RunConfigSource> ResolveRunConfig(const std::string& config_flag, const std::vector<std::string>& set_flags,
                                           const EnvLookup& env);

}  // namespace hypertrain::config
