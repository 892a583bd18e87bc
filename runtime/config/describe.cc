// DescribeConfig: the resolved, typed config as YAML, in the recipe layout.
#include <yaml-cpp/yaml.h>

#include "runtime/config/config.h"

namespace hypertrain::config {
namespace {

const char* ScheduleName(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kCosine: return "cosine";
    case ScheduleKind::kConstant: return "constant";
    case ScheduleKind::kLinear: return "linear";
  }
  return "?";
}

template <typename T>
void Kv(YAML::Emitter& e, const char* k, const T& v) {
  e << YAML::Key << k << YAML::Value << v;
}

// `key: [a, b, ...]` on one line.
template <typename T>
void FlowList(YAML::Emitter& e, const char* k, const std::vector<T>& v) {
  e << YAML::Key << k << YAML::Value << YAML::Flow << v;
}

// `key:` and the keys fn emits, as a nested map (on one line if flow).
template <typename Fn>
void Section(YAML::Emitter& e, const char* k, Fn&& fn, bool flow = false) {
  e << YAML::Key << k << YAML::Value;
  if (flow) e << YAML::Flow;
  e << YAML::BeginMap;
  fn();
  e << YAML::EndMap;
}

void EmitTrainer(YAML::Emitter& e, const TrainConfig& c) {
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
  Section(e, "profile", [&] {
    Kv(e, "start_step", c.profile.start_step);
    Kv(e, "num_steps", c.profile.num_steps);
    Kv(e, "dir", c.profile.dir);
  });
  if (!c.loss_scale.enabled) return;
  Section(e, "loss_scale", [&] {
    Kv(e, "initial_scale", c.loss_scale.initial_scale);
    Kv(e, "growth_interval", c.loss_scale.growth_interval);
    Kv(e, "growth_factor", c.loss_scale.growth_factor);
    Kv(e, "backoff_factor", c.loss_scale.backoff_factor);
    Kv(e, "min_scale", c.loss_scale.min_scale);
  });
}

// model.do_finetune, model.hf_model_name_or_path and model.peft (PEFT's
// LoraConfig names); exp_manager.adapter_dir is in EmitExpManager.
void EmitFinetune(YAML::Emitter& e, const FinetuneConfig& f) {
  Kv(e, "do_finetune", f.do_finetune);
  Kv(e, "hf_model_name_or_path", f.hf_model_name_or_path);
  const model::PeftOptions& p = f.peft;
  Section(e, "peft", [&] {
    Kv(e, "peft_type", model::PeftTypeName(p.type));
    if (!p.enabled()) return;
    Kv(e, "rank", p.rank);
    Kv(e, "alpha", p.alpha);
    Kv(e, "dropout", p.dropout);
    std::vector<std::string> targets;
    for (int t : p.targets) targets.push_back(model::TargetModuleName(t));
    FlowList(e, "target_modules", targets);
    if (p.fp8_base) Kv(e, "fp8_base", true);
  });
}

void EmitModel(YAML::Emitter& e, const TrainConfig& c) {
  const model::ModelConfig& m = c.model;
  Kv(e, "vocab_size", m.vocab_size);
  Kv(e, "hidden_size", m.hidden_size);
  Kv(e, "num_hidden_layers", m.num_hidden_layers);
  Kv(e, "num_attention_heads", m.num_attention_heads);
  Kv(e, "num_key_value_heads", m.num_key_value_heads);
  Kv(e, "intermediate_size", m.intermediate_size);
  Kv(e, "max_context_width", m.max_context_width);
  Kv(e, "rope_theta", m.rope_theta);
  if (m.rope_scaling.type == model::RopeScalingType::kNone) {
    Kv(e, "rope_scaling", YAML::Null);
  } else {
    Section(e, "rope_scaling", [&] {
      Kv(e, "rope_type", "llama3");
      Kv(e, "factor", m.rope_scaling.factor);
      Kv(e, "low_freq_factor", m.rope_scaling.low_freq_factor);
      Kv(e, "high_freq_factor", m.rope_scaling.high_freq_factor);
      Kv(e, "original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings);
    });
  }
  Kv(e, "rms_norm_eps", m.rms_norm_eps);
  Kv(e, "tie_word_embeddings", m.tie_word_embeddings);
  if (m.max_position_embeddings > 0) Kv(e, "max_position_embeddings", m.max_position_embeddings);
  Kv(e, "train_batch_size", c.train_batch_size);
  Kv(e, "val_batch_size", c.validation.batch_size);
  Kv(e, "grad_accumulation_steps", c.grad_accumulation_steps);
  Kv(e, "grad_clip", c.grad_clip);
  Kv(e, "activation_checkpointing", model::CheckpointingName(c.activation_checkpointing));
  Kv(e, "sharding_strategy", contract::ShardingStrategyName(c.sharding_strategy));
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
  EmitFinetune(e, c.finetune);
  const OptimConfig& o = c.optim;
  Section(e, "optim", [&] {
    Kv(e, "name", "adamw");
    Kv(e, "lr", o.lr);
    Kv(e, "weight_decay", o.weight_decay);
    FlowList(e, "betas", std::vector<double>{o.beta1, o.beta2});
    Kv(e, "eps", o.eps);
    Section(e, "sched", [&] {
      Kv(e, "name", ScheduleName(o.sched));
      Kv(e, "warmup_steps", o.warmup_steps);
      Kv(e, "constant_steps", o.constant_steps);
      Kv(e, "decay_end_step", o.DecayEnd(c.max_steps));
      Kv(e, "min_lr", o.min_lr);
    });
  });
  Section(e, "data", [&] {
    Kv(e, "train_dir", c.data.train_dir);
    Kv(e, "val_dir", c.validation.val_dir);
    Kv(e, "use_synthetic_data", c.data.use_synthetic_data);
    Kv(e, "tokenizer", c.data.tokenizer);
    Kv(e, "prefetch_depth", c.data.prefetch_depth);
  });
}

void EmitExpManager(YAML::Emitter& e, const TrainConfig& c) {
  const CheckpointConfig& k = c.checkpoint;
  Kv(e, "exp_dir", c.exp_dir);
  Kv(e, "create_tensorboard_logger", c.tensorboard);
  Kv(e, "checkpoint_dir", c.checkpoint_dir);
  Kv(e, "sharded_checkpoints", k.enabled);
  if (!k.enabled) Kv(e, "sharded_checkpoints_off_by", k.disabled_by);
  Section(e, "checkpoint_callback_params", [&] {
    Kv(e, "save_top_k", c.save_top_k);
    Kv(e, "every_n_train_steps", k.every_n_train_steps);
    Kv(e, "save_last", k.save_last);
  });
  Kv(e, "every_n_minutes", k.every_n_minutes);
  Kv(e, "resume_from_checkpoint", c.resume_from_checkpoint);
  Kv(e, "start_fresh", c.start_fresh);
  Kv(e, "async_save", k.async_save);
  Section(e, "auto_checkpoint", [&] {
    Kv(e, "enabled", k.auto_interval);
    if (!k.auto_interval) return;
    Kv(e, "max_overhead", k.auto_max_overhead);
    Kv(e, "max_lost_minutes", k.auto_max_lost_minutes);
    Kv(e, "min_interval_s", k.auto_min_interval_s);
  });
  Section(e, "export_full_model", [&] {
    Kv(e, "every_n_train_steps", k.export_every_n_train_steps);
    Kv(e, "save_last", k.export_save_last);
    Kv(e, "dir", k.export_dir);
  });
  Section(e, "checkpoint", [&] {
    Kv(e, "failure_policy", FailurePolicyName(k.failure_policy));
    Kv(e, "verify_checksums", k.verify_checksums);
    Kv(e, "coordinator_timeout_s", k.coordinator_timeout_s);
    Kv(e, "export_hf_dir", k.export_hf_dir);
    Kv(e, "export_hf_dtype", k.export_dtype);
  });
  Kv(e, "hf_init_from", k.hf_init_from);
  Kv(e, "adapter_dir", c.finetune.adapter_dir);
}

void EmitDistributed(YAML::Emitter& e, const TrainConfig& c) {
  const DistributedConfig& d = c.distributed;
  Kv(e, "rendezvous_timeout_s", d.rendezvous_timeout_s);
  Kv(e, "gloo_hostname", d.gloo_hostname);
  Kv(e, "reduce_dtype", ReduceDtypeName(d.reduce_dtype));
  Kv(e, "split_embedding_grad", d.split_embedding_grad);
  Kv(e, "replica_reduce", d.replica_reduce);
  Section(e, "nccl", [&] {
    for (auto [kind, k] : {std::pair{"shard", &d.nccl_shard}, {"replica", &d.nccl_replica}, {"world", &d.nccl_world}}) {
      Section(e, kind, [&] {
        Kv(e, "max_ctas", k->max_ctas);
        Kv(e, "priority", k->priority);
      }, /*flow=*/true);
    }
  });
}

void EmitCuda(YAML::Emitter& e, const TrainConfig& c) {
  Kv(e, "attention_impl", AttentionImplName(c.cuda.attention_impl));
  Kv(e, "gemm_autotune", c.cuda.gemm_autotune);
  Kv(e, "cudnn_bwd_workspace_mb", c.cuda.cudnn_bwd_workspace_mb);
}

}  // namespace

std::string DescribeConfig(const TrainConfig& c) {
  YAML::Emitter e;
  e.SetDoublePrecision(10);
  e << YAML::BeginMap;
  const std::pair<const char*, void (*)(YAML::Emitter&, const TrainConfig&)> sections[] = {
      {"trainer", EmitTrainer},         {"model", EmitModel}, {"exp_manager", EmitExpManager},
      {"distributed", EmitDistributed}, {"cuda", EmitCuda},
  };
  for (const auto& [name, emit] : sections) Section(e, name, [&] { emit(e, c); });
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace hypertrain::config
