// DescribeConfig: the resolved, typed config as YAML, in the recipe layout.
#include <yaml-cpp/yaml.h>

#include "runtime/config/config.h"

namespace hypertrain::config {
namespace {

const char* ScheduleName(train::ScheduleKind k) {
  switch (k) {
    case train::ScheduleKind::kCosine: return "cosine";
    case train::ScheduleKind::kConstant: return "constant";
    case train::ScheduleKind::kLinear: return "linear";
  }
  return "?";
}

template <typename T>
void Kv(YAML::Emitter& e, const char* k, const T& v) {
  e << YAML::Key << k << YAML::Value << v;
}

void EmitTrainer(YAML::Emitter& e, const TrainConfig& c) {
  e << YAML::Key << "trainer" << YAML::Value << YAML::BeginMap;
  Kv(e, "max_steps", c.max_steps);
  Kv(e, "precision", model::PrecisionName(c.precision));
  Kv(e, "log_every_n_steps", c.log_every_n_steps);
  Kv(e, "deterministic", c.deterministic);
  Kv(e, "backend", c.backend);
  Kv(e, "peak_tflops", c.peak_tflops);
  Kv(e, "devices", c.devices);
  Kv(e, "num_nodes", c.num_nodes);
  Kv(e, "collective_timeout", c.collective_timeout_s);
  Kv(e, "cuda_graphs", c.cuda.cuda_graphs);
  Kv(e, "val_check_interval", c.validation.check_interval);
  Kv(e, "limit_val_batches", c.validation.limit_batches);
  if (c.loss_scale.enabled) {
    e << YAML::Key << "loss_scale" << YAML::Value << YAML::BeginMap;
    Kv(e, "initial_scale", c.loss_scale.initial_scale);
    Kv(e, "growth_interval", c.loss_scale.growth_interval);
    Kv(e, "growth_factor", c.loss_scale.growth_factor);
    Kv(e, "backoff_factor", c.loss_scale.backoff_factor);
    Kv(e, "min_scale", c.loss_scale.min_scale);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

void EmitModel(YAML::Emitter& e, const TrainConfig& c) {
  const model::ModelConfig& m = c.model;
  e << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  Kv(e, "vocab_size", m.vocab_size);
  Kv(e, "hidden_size", m.hidden_size);
  Kv(e, "num_hidden_layers", m.num_hidden_layers);
  Kv(e, "num_attention_heads", m.num_attention_heads);
  Kv(e, "num_key_value_heads", m.num_key_value_heads);
  Kv(e, "intermediate_size", m.intermediate_size);
  Kv(e, "max_context_width", m.max_context_width);
  Kv(e, "rope_theta", m.rope_theta);
  e << YAML::Key << "rope_scaling" << YAML::Value;
  if (m.rope_scaling.type == model::RopeScalingType::kNone) {
    e << YAML::Null;
  } else {
    e << YAML::BeginMap;
    Kv(e, "rope_type", "llama3");
    Kv(e, "factor", m.rope_scaling.factor);
    Kv(e, "low_freq_factor", m.rope_scaling.low_freq_factor);
    Kv(e, "high_freq_factor", m.rope_scaling.high_freq_factor);
    Kv(e, "original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings);
    e << YAML::EndMap;
  }
  Kv(e, "rms_norm_eps", m.rms_norm_eps);
  Kv(e, "tie_word_embeddings", m.tie_word_embeddings);
  Kv(e, "train_batch_size", c.train_batch_size);
  Kv(e, "val_batch_size", c.validation.batch_size);
  Kv(e, "grad_accumulation_steps", c.grad_accumulation_steps);
  Kv(e, "grad_clip", c.grad_clip);
  Kv(e, "activation_checkpointing", model::CheckpointingName(c.activation_checkpointing));
  Kv(e, "sharding_strategy", c.sharding_strategy);
  Kv(e, "shard_degree", c.shard_degree);
  Kv(e, "seed", c.seed);
  Kv(e, "fp8", c.fp8.enabled);
  if (c.fp8.enabled) {
    Kv(e, "fp8_recipe", model::Fp8RecipeName(c.fp8.recipe));
    Kv(e, "fp8_amax_history_len", c.fp8.amax_history_len);
    Kv(e, "fp8_amax_compute_algo", model::AmaxComputeAlgoName(c.fp8.amax_compute_algo));
    Kv(e, "fp8_margin", c.fp8.margin);
    Kv(e, "fp8_grad_format", model::Fp8FormatName(c.fp8.grad_format));
    Kv(e, "fp8_lm_head", c.fp8.lm_head);
  }
  Kv(e, "do_finetune", c.finetune.do_finetune);
  Kv(e, "hf_model_name_or_path", c.finetune.hf_model_name_or_path);
  const OptimConfig& o = c.optim;
  e << YAML::Key << "optim" << YAML::Value << YAML::BeginMap;
  Kv(e, "name", "adamw");
  Kv(e, "lr", o.lr);
  Kv(e, "weight_decay", o.weight_decay);
  e << YAML::Key << "betas" << YAML::Value << YAML::Flow << std::vector<double>{o.beta1, o.beta2};
  Kv(e, "eps", o.eps);
  e << YAML::Key << "sched" << YAML::Value << YAML::BeginMap;
  Kv(e, "name", ScheduleName(o.sched));
  Kv(e, "warmup_steps", o.warmup_steps);
  Kv(e, "constant_steps", o.constant_steps);
  Kv(e, "decay_end_step", o.DecayEnd(c.max_steps));
  Kv(e, "min_lr", o.min_lr);
  e << YAML::EndMap << YAML::EndMap;
  e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  Kv(e, "train_dir", c.data.train_dir);
  Kv(e, "val_dir", c.validation.val_dir);
  Kv(e, "use_synthetic_data", c.data.use_synthetic_data);
  Kv(e, "tokenizer", c.data.tokenizer);
  Kv(e, "prefetch_depth", c.data.prefetch_depth);
  e << YAML::EndMap << YAML::EndMap;
}

void EmitExpManager(YAML::Emitter& e, const TrainConfig& c) {
  const CheckpointConfig& k = c.checkpoint;
  e << YAML::Key << "exp_manager" << YAML::Value << YAML::BeginMap;
  Kv(e, "exp_dir", c.exp_dir);
  Kv(e, "create_tensorboard_logger", c.tensorboard);
  Kv(e, "checkpoint_dir", c.checkpoint_dir);
  Kv(e, "sharded_checkpoints", k.enabled);
  if (!k.enabled) Kv(e, "sharded_checkpoints_off_by", k.disabled_by);
  e << YAML::Key << "checkpoint_callback_params" << YAML::Value << YAML::BeginMap;
  Kv(e, "save_top_k", c.save_top_k);
  Kv(e, "every_n_train_steps", c.every_n_train_steps);
  Kv(e, "save_last", k.save_last);
  e << YAML::EndMap;
  Kv(e, "every_n_minutes", c.every_n_minutes);
  Kv(e, "resume_from_checkpoint", c.resume_from_checkpoint);
  Kv(e, "start_fresh", c.start_fresh);
  Kv(e, "async_save", k.async_save);
  e << YAML::Key << "auto_checkpoint" << YAML::Value << YAML::BeginMap;
  Kv(e, "enabled", k.auto_interval);
  if (k.auto_interval) {
    Kv(e, "max_overhead", k.auto_max_overhead);
    Kv(e, "max_lost_minutes", k.auto_max_lost_minutes);
    Kv(e, "min_interval_s", k.auto_min_interval_s);
  }
  e << YAML::EndMap;
  e << YAML::Key << "export_full_model" << YAML::Value << YAML::BeginMap;
  Kv(e, "every_n_train_steps", k.export_every_n_train_steps);
  Kv(e, "save_last", k.export_save_last);
  Kv(e, "dir", k.export_dir);
  e << YAML::EndMap;
  e << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  Kv(e, "failure_policy", k.failure_policy);
  Kv(e, "verify_checksums", k.verify_checksums);
  Kv(e, "coordinator_timeout_s", k.coordinator_timeout_s);
  Kv(e, "export_hf_dir", k.export_hf_dir);
  Kv(e, "export_hf_dtype", k.export_dtype);
  e << YAML::EndMap;
  Kv(e, "hf_init_from", k.hf_init_from);
  e << YAML::EndMap;
}

void EmitDistributed(YAML::Emitter& e, const TrainConfig& c) {
  const DistributedConfig& d = c.distributed;
  e << YAML::Key << "distributed" << YAML::Value << YAML::BeginMap;
  Kv(e, "rendezvous_timeout_s", d.rendezvous_timeout_s);
  Kv(e, "gloo_hostname", d.gloo_hostname);
  Kv(e, "reduce_dtype", d.reduce_dtype);
  Kv(e, "split_embedding_grad", d.split_embedding_grad);
  Kv(e, "replica_reduce", d.replica_reduce);
  e << YAML::Key << "nccl" << YAML::Value << YAML::BeginMap;
  for (auto [kind, k] : {std::pair{"shard", &d.nccl_shard}, {"replica", &d.nccl_replica}, {"world", &d.nccl_world}}) {
    e << YAML::Key << kind << YAML::Value << YAML::Flow << YAML::BeginMap;
    Kv(e, "max_ctas", k->max_ctas);
    Kv(e, "priority", k->priority);
    e << YAML::EndMap;
  }
  e << YAML::EndMap << YAML::EndMap;
}

void EmitCuda(YAML::Emitter& e, const CudaConfig& cu) {
  e << YAML::Key << "cuda" << YAML::Value << YAML::BeginMap;
  Kv(e, "attention_impl", cu.attention_impl);
  Kv(e, "gemm_autotune", cu.gemm_autotune);
  Kv(e, "cudnn_bwd_workspace_mb", cu.cudnn_bwd_workspace_mb);
  e << YAML::EndMap;
}

}  // namespace

std::string DescribeConfig(const TrainConfig& c) {
  YAML::Emitter e;
  e.SetDoublePrecision(10);
  e << YAML::BeginMap;
  EmitTrainer(e, c);
  EmitModel(e, c);
  EmitExpManager(e, c);
  EmitDistributed(e, c);
  EmitCuda(e, c.cuda);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace hypertrain::config
