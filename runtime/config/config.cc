#include "runtime/config/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "contract/env.h"
#include "contract/sharding.h"
#include "contract/trainer_config.h"
#include "runtime/config/reader.h"
#include "contract/profile.h"

namespace hypertrain::config {

using internal::Reader;
using internal::ValidateAndFinish;
using internal::ValidateRanges;

const std::vector<EnvOverride>& EnvOverrides() {
  static const std::vector<EnvOverride> kTable = {
      {"HT_RENDEZVOUS_TIMEOUT_S", "distributed.rendezvous_timeout_s"},
      {"HT_GLOO_HOSTNAME", "distributed.gloo_hostname"},
      {"HT_REDUCE_DTYPE", "distributed.reduce_dtype"},
      {"HT_SPLIT_EMBEDDING_GRAD", "distributed.split_embedding_grad"},
      {"HT_REPLICA_REDUCE", "distributed.replica_reduce"},
      {"HT_NCCL_SHARD_MAX_CTAS", "distributed.nccl.shard.max_ctas"},
      {"HT_NCCL_SHARD_PRIORITY", "distributed.nccl.shard.priority"},
      {"HT_NCCL_REPLICA_MAX_CTAS", "distributed.nccl.replica.max_ctas"},
      {"HT_NCCL_REPLICA_PRIORITY", "distributed.nccl.replica.priority"},
      {"HT_NCCL_WORLD_MAX_CTAS", "distributed.nccl.world.max_ctas"},
      {"HT_NCCL_WORLD_PRIORITY", "distributed.nccl.world.priority"},
      {"HT_CUDA_GRAPHS", "trainer.cuda_graphs"},
      {"HT_ATTENTION_IMPL", "cuda.attention_impl"},
      {"HT_GEMM_AUTOTUNE", "cuda.gemm_autotune"},
      {"HT_CUDNN_BWD_WORKSPACE_MB", "cuda.cudnn_bwd_workspace_mb"},
      {"HT_UNKNOWN_KEYS", "hypertrain.unknown_keys"},
  };
  return kTable;
}

namespace {

void CollectLeaves(const YAML::Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (!n.IsMap() || (n.size() == 0 && !prefix.empty())) {
    out.push_back(prefix);
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    CollectLeaves(it->second, prefix.empty() ? k : prefix + "." + k, out);
  }
}

Status ApplyOverride(YAML::Node& root, const std::string& kv, const std::string& origin) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument(fmt::format("{} '{}': expected key.path=value", origin, kv));
  }
  const std::string path = kv.substr(0, eq), text = kv.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{} {}: value '{}' is not valid YAML: {}", origin, path, text, e.msg));
  }
  const std::vector<std::string> parts = internal::SplitPath(path);
  if (parts.empty()) return InvalidArgument(fmt::format("{} '{}': empty key", origin, kv));
  YAML::Node n;
  n.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].empty()) return InvalidArgument(fmt::format("{} '{}': empty key segment", origin, kv));
    YAML::Node child = n[parts[i]];
    if (!child.IsMap()) {
      n[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child.reset(n[parts[i]]);
    }
    n.reset(child);
  }
  n[parts.back()] = value;
  return Status::Ok();
}

// File, then HT_* environment overrides, then --set; then the HyperPod
// launcher's default exp_dir; then interpolation.
Status PrepareDocument(YAML::Node& root, const std::vector<std::string>& overrides, const EnvLookup& env,
                       std::vector<std::string>* notes) {
  if (env) {
    for (const EnvOverride& e : EnvOverrides()) {
      const char* v = env(e.var);
      if (v == nullptr || *v == '\0') continue;
      // Quoted, so that the value is text whatever it looks like; typed
      // reads convert it.
      std::string quoted = "'";
      for (const char* p = v; *p; ++p) quoted += *p == '\'' ? std::string("''") : std::string(1, *p);
      HT_RETURN_IF_ERROR(ApplyOverride(root, std::string(e.key) + "=" + quoted + "'", e.var));
      notes->push_back(fmt::format("{}={} sets {}", e.var, v, e.key));
    }
  }
  for (const std::string& o : overrides) HT_RETURN_IF_ERROR(ApplyOverride(root, o, "--set"));
  // exp_manager.exp_dir: null in a recipe means the launcher's results dir.
  const YAML::Node exp = internal::Lookup(root, "exp_manager.exp_dir");
  if ((!exp.IsDefined() || exp.IsNull()) && internal::Lookup(root, "run.results_dir").IsDefined()) {
    HT_RETURN_IF_ERROR(ApplyOverride(root, "exp_manager.exp_dir='${run.results_dir}'", "default"));
  }
  return ResolveInterpolations(root, env);
}

void ReadCuda(Reader& r, CudaConfig& cu) {
  r.Bool("trainer.cuda_graphs", &cu.cuda_graphs);
  r.Enum("cuda.attention_impl", &cu.attention_impl, ParseAttentionImpl);
  r.String("cuda.gemm_autotune", &cu.gemm_autotune);
  r.Int("cuda.cudnn_bwd_workspace_mb", &cu.cudnn_bwd_workspace_mb);
}

// "model.x: V: hypertrain does not ...; supported: ..." for keys asking for
// what hypertrain does not do.
Status CannotHonour(const std::string& key, const std::string& value, const std::string& why,
                    const std::string& supported) {
  return InvalidArgument(fmt::format("{}: {}: {}; supported: {}", key, value, why, supported));
}

// Recipe keys whose meaning hypertrain cannot honour (and informational keys
// whose value must match what hypertrain does).
Status CheckUnsupported(Reader& r) {
  const char* kParallel[][2] = {
      {"model.tensor_model_parallel_degree", "tensor parallelism"},
      {"model.expert_model_parallel_degree", "expert parallelism"},
      {"model.context_parallel_degree", "context parallelism"},
  };
  for (const auto& p : kParallel) {
    int64_t degree = 1;
    r.Int(p[0], &degree);
    if (degree != 1) {
      return CannotHonour(p[0], std::to_string(degree), fmt::format("hypertrain does not do {}", p[1]),
                          "1 (hybrid-sharded data parallelism: model.sharding_strategy, model.shard_degree)");
    }
  }
  bool moe = false, offload = false, viztracer = false;
  r.Bool("model.moe", &moe);
  r.Bool("model.offload_activations", &offload);
  r.Bool("model.viztracer.enabled", &viztracer);
  if (moe) return CannotHonour("model.moe", "true", "mixture-of-experts layers are not implemented", "false (dense Llama)");
  if (offload) {
    return CannotHonour("model.offload_activations", "true", "activation offloading to host memory is not implemented",
                        "false (reduce memory with model.activation_checkpointing)");
  }
  if (viztracer) {
    return CannotHonour("model.viztracer.enabled", "true", "VizTracer profiles Python; the trainer is C++",
                        "false (profile with Nsight Systems: steps carry NVTX ranges)");
  }
  std::string model_type = "llama_v3", dataset_type = "hf";
  r.String("model.model_type", &model_type);
  if (model_type.rfind("llama", 0) != 0) {
    return CannotHonour("model.model_type", model_type, "hypertrain trains Llama models", "llama_v3, llama_v2, llama");
  }
  r.String("model.data.dataset_type", &dataset_type);
  if (dataset_type != "hf" && dataset_type != "hypertrain" && dataset_type != "megatron") {
    return CannotHonour("model.data.dataset_type", dataset_type, "no loader for it",
                        "hf (a pre-tokenized save_to_disk dataset), hypertrain (`hypertrain prepare` shards), "
                        "megatron (*.idx/*.bin)");
  }
  double init_range = 0.02;
  r.Double("model.initializer_range", &init_range);
  if (std::abs(init_range - 0.02) > 1e-12) {
    return CannotHonour("model.initializer_range", fmt::format("{}", init_range),
                        "weights are initialised from N(0, 0.02) (runtime/model/init.h)", "0.02");
  }
  return r.status();
}

void ReadTrainer(Reader& r, TrainConfig& c) {
  r.Int("trainer.log_every_n_steps", &c.log_every_n_steps);
  r.Bool("trainer.deterministic", &c.deterministic);
  r.String("trainer.backend", &c.backend);
  r.Double("trainer.peak_tflops", &c.peak_tflops);
  r.Double("trainer.loss_scale.initial_scale", &c.loss_scale.initial_scale);
  r.Int("trainer.loss_scale.growth_interval", &c.loss_scale.growth_interval);
  r.Double("trainer.loss_scale.growth_factor", &c.loss_scale.growth_factor);
  r.Double("trainer.loss_scale.backoff_factor", &c.loss_scale.backoff_factor);
  r.Double("trainer.loss_scale.min_scale", &c.loss_scale.min_scale);
  r.Double("trainer.collective_timeout", &c.collective_timeout_s);
  r.Int("trainer.profile.start_step", &c.profile.start_step);
  r.Int("trainer.profile.num_steps", &c.profile.num_steps);
  r.String("trainer.profile.dir", &c.profile.dir);
  ReadCuda(r, c.cuda);
  DistributedConfig& d = c.distributed;
  r.Double("distributed.rendezvous_timeout_s", &d.rendezvous_timeout_s);
  r.String("distributed.gloo_hostname", &d.gloo_hostname);
  r.Enum("distributed.reduce_dtype", &d.reduce_dtype, ParseReduceDtype);
  r.Bool("distributed.split_embedding_grad", &d.split_embedding_grad);
  r.String("distributed.replica_reduce", &d.replica_reduce);
  for (auto [kind, k] : {std::pair{"shard", &d.nccl_shard}, {"replica", &d.nccl_replica}, {"world", &d.nccl_world}}) {
    r.Int(fmt::format("distributed.nccl.{}.max_ctas", kind), &k->max_ctas);
    r.String(fmt::format("distributed.nccl.{}.priority", kind), &k->priority);
  }
}

void ReadRopeScaling(Reader& r, model::ModelConfig& m) {
  if (r.Has("model.rope_scaling")) {
    const YAML::Node rs = r.Node("model.rope_scaling");
    if (!rs.IsMap()) {
      r.Fail(InvalidArgument("model.rope_scaling: expected a map {rope_type, factor, ...} or null"));
      return;
    }
    std::string type = "llama3";
    r.String("model.rope_scaling.type", &type);
    r.String("model.rope_scaling.rope_type", &type);
    if (type == "llama3") {
      m.rope_scaling.type = model::RopeScalingType::kLlama3;
    } else if (type == "none" || type == "default") {
      m.rope_scaling.type = model::RopeScalingType::kNone;
    } else {
      r.Fail(InvalidArgument(fmt::format("model.rope_scaling.rope_type: '{}' is not one of llama3, none", type)));
    }
    r.Double("model.rope_scaling.factor", &m.rope_scaling.factor);
    r.Double("model.rope_scaling.low_freq_factor", &m.rope_scaling.low_freq_factor);
    r.Double("model.rope_scaling.high_freq_factor", &m.rope_scaling.high_freq_factor);
    r.Int("model.rope_scaling.original_max_position_embeddings", &m.rope_scaling.original_max_position_embeddings);
  } else if (r.Node("model.rope_scaling").IsDefined()) {  // rope_scaling: null
    m.rope_scaling.type = model::RopeScalingType::kNone;
  }
}

void ReadModel(Reader& r, TrainConfig& c, int64_t* seed) {
  model::ModelConfig& m = c.model;
  r.Int("model.max_position_embeddings", &m.max_position_embeddings);  // for exports' config.json
  r.Double("model.rope_theta", &m.rope_theta);
  r.Double("model.rms_norm_eps", &m.rms_norm_eps);
  r.Double("model.layernorm_epsilon", &m.rms_norm_eps);  // HyperPod's name
  ReadRopeScaling(r, m);
  r.Int("model.val_batch_size", &c.validation.batch_size);
  r.Double("model.grad_clip", &c.grad_clip);
  r.Double("model.collective_timeout", &c.collective_timeout_s);
  r.Int("model.seed", seed);
  r.Bool("model.do_finetune", &c.finetune.do_finetune);
  r.String("model.hf_model_name_or_path", &c.finetune.hf_model_name_or_path);
}

// The keys the operator reads too, through the one reader both use
// (contract/trainer_config.h): world, precision, model shape, batch,
// activation checkpointing, sharding.
Status ApplyShared(Reader& r, const YAML::Node& root, TrainConfig& c) {
  std::string error;
  const std::optional<contract::SharedTrainerConfig> s = contract::ReadSharedTrainerConfig(root, &error);
  if (!s) return InvalidArgument(error);
  for (const std::string& k : contract::SharedTrainerConfigKeys()) r.Known(k);
  c.max_steps = s->max_steps;
  c.devices = s->devices;
  c.num_nodes = s->num_nodes;
  c.precision = s->precision;
  c.shape = s->shape;
  HT_ASSIGN_OR_RETURN(c.model, model::NamedModelConfig(c.shape.empty() ? "tiny" : c.shape));
  static_cast<contract::ModelShape&>(c.model) = s->model;  // the shape fields, declared once
  c.model.max_context_width = s->max_context_width;
  c.train_batch_size = s->train_batch_size;
  c.grad_accumulation_steps = s->grad_accumulation_steps;
  c.activation_checkpointing = s->activation_checkpointing;
  c.sharding_strategy = s->sharding_strategy;
  c.shard_degree = s->shard_degree;
  return Status::Ok();
}

// model.peft.* (PEFT's own names r, lora_alpha, lora_dropout too) and
// exp_manager.adapter_dir; the names become enums in FinishPeft.
struct PeftKeys {
  std::string type;
  bool has_targets = false;
  std::vector<std::string> targets;
};

void ReadPeft(Reader& r, FinetuneConfig& ft, PeftKeys* k) {
  r.String("model.peft.peft_type", &k->type);
  r.Int("model.peft.rank", &ft.peft.rank);
  r.Int("model.peft.r", &ft.peft.rank);
  r.Double("model.peft.alpha", &ft.peft.alpha);
  r.Double("model.peft.lora_alpha", &ft.peft.alpha);
  r.Double("model.peft.dropout", &ft.peft.dropout);
  r.Double("model.peft.lora_dropout", &ft.peft.dropout);
  r.Bool("model.peft.fp8_base", &ft.peft.fp8_base);
  r.String("exp_manager.adapter_dir", &ft.adapter_dir);
  k->has_targets = r.Has("model.peft.target_modules");
  if (!k->has_targets) return;
  const YAML::Node t = r.Node("model.peft.target_modules");
  try {
    if (t.IsSequence()) {
      for (const auto& x : t) k->targets.push_back(x.as<std::string>());
      return;
    }
    std::stringstream ss(t.as<std::string>());
    for (std::string x; std::getline(ss, x, ',');) {
      x.erase(0, x.find_first_not_of(" "));
      x.erase(x.find_last_not_of(" ") + 1);
      if (!x.empty()) k->targets.push_back(x);
    }
  } catch (const YAML::Exception&) {
    r.Fail(InvalidArgument("model.peft.target_modules: expected a list of module names, e.g. [q_proj, v_proj]"));
  }
}

Status FinishPeft(const PeftKeys& k, model::PeftOptions& peft) {
  HT_ASSIGN_OR_RETURN(peft.type, model::ParsePeftType(k.type));
  if (!k.has_targets) return Status::Ok();
  std::vector<int> targets;
  for (const std::string& n : k.targets) {
    if (n == "all-linear" || n == "all_linear") {
      targets = model::PeftOptions{}.targets;
      break;
    }
    HT_ASSIGN_OR_RETURN(int t, model::ParseTargetModule(n));
    targets.push_back(t);
  }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  peft.targets = targets;
  return Status::Ok();
}

void ReadFp8(Reader& r, model::Fp8Options& f, std::string* recipe, std::string* algo, std::string* grad) {
  r.Bool("model.fp8", &f.enabled);
  r.String("model.fp8_recipe", recipe);
  r.Int("model.fp8_amax_history_len", &f.amax_history_len);
  r.String("model.fp8_amax_compute_algo", algo);
  r.Int("model.fp8_margin", &f.margin);
  r.String("model.fp8_grad_format", grad);
  r.Bool("model.fp8_lm_head", &f.lm_head);
}

void ReadOptimAndData(Reader& r, TrainConfig& c, std::string* sched, int64_t* depth) {
  OptimConfig& o = c.optim;
  r.String("model.optim.name", &o.name);
  r.Double("model.optim.lr", &o.lr);
  r.Double("model.optim.weight_decay", &o.weight_decay);
  r.Double("model.optim.eps", &o.eps);
  if (r.Has("model.optim.betas")) {
    const YAML::Node b = r.Node("model.optim.betas");
    try {
      if (!b.IsSequence() || b.size() != 2) throw YAML::Exception(YAML::Mark(), "");
      o.beta1 = b[0].as<double>();
      o.beta2 = b[1].as<double>();
      if (!std::isfinite(o.beta1) || !std::isfinite(o.beta2)) throw YAML::Exception(YAML::Mark(), "");
    } catch (const YAML::Exception&) {
      r.Fail(InvalidArgument("model.optim.betas: expected a list of two numbers, e.g. [0.9, 0.95]"));
    }
  }
  r.String("model.optim.sched.name", sched);
  r.Int("model.optim.sched.warmup_steps", &o.warmup_steps);
  r.Int("model.optim.sched.constant_steps", &o.constant_steps);
  r.Double("model.optim.sched.min_lr", &o.min_lr);
  r.Int("model.lr_decay_iters", &o.decay_steps);
  r.String("model.data.train_dir", &c.data.train_dir);
  r.String("model.data.val_dir", &c.validation.val_dir);
  r.Bool("model.data.use_synthetic_data", &c.data.use_synthetic_data);
  r.String("model.data.tokenizer", &c.data.tokenizer);
  r.Int("model.data.prefetch_depth", depth);
}

// A value given under two names (hypertrain's flat exp_manager key and the
// recipe's checkpoint_callback_params) must agree.
template <typename T>
void ReadAlias(Reader& r, const std::string& a, const std::string& b, T* out) {
  T va = *out, vb = *out;
  const bool has_a = r.Has(a), has_b = r.Has(b);
  if constexpr (std::is_same_v<T, bool>) {
    r.Bool(a, &va);
    r.Bool(b, &vb);
  } else {
    r.Int(a, &va);
    r.Int(b, &vb);
  }
  if (has_a && has_b && va != vb) {
    r.Fail(InvalidArgument(fmt::format("{} ({}) and {} ({}) disagree; give one", a, va, b, vb)));
  }
  *out = has_b ? vb : va;
}

void ReadExpManager(Reader& r, TrainConfig& c) {
  CheckpointConfig& k = c.checkpoint;
  r.String("exp_manager.exp_dir", &c.exp_dir);
  r.String("exp_manager.checkpoint_dir", &c.checkpoint_dir);
  r.String("exp_manager.resume_from_checkpoint", &c.resume_from_checkpoint);
  r.Double("exp_manager.every_n_minutes", &k.every_n_minutes);
  r.Bool("exp_manager.start_fresh", &c.start_fresh);
  const std::string cb = "exp_manager.checkpoint_callback_params.";
  ReadAlias(r, "exp_manager.every_n_train_steps", cb + "every_n_train_steps", &k.every_n_train_steps);
  ReadAlias(r, "exp_manager.save_top_k", cb + "save_top_k", &c.save_top_k);
  ReadAlias(r, "exp_manager.checkpoint.save_last", cb + "save_last", &k.save_last);
  std::string monitor = "step", mode = "max";
  r.String(cb + "monitor", &monitor);
  r.String(cb + "mode", &mode);
  if (monitor != "step") {
    r.Fail(CannotHonour(cb + "monitor", monitor, "checkpoints are ranked by step only",
                        "step (with mode: max: the newest save_top_k are kept)"));
  } else if (mode != "max") {
    r.Fail(CannotHonour(cb + "mode", mode, "with monitor: step the newest checkpoints are kept", "max"));
  }
  bool create_callback = true;
  r.Bool("exp_manager.create_checkpoint_callback", &create_callback);
  if (!create_callback) {
    k.enabled = false;
    k.disabled_by = "exp_manager.create_checkpoint_callback: false";
  } else if (c.save_top_k == 0) {
    k.enabled = false;
    k.disabled_by = cb + "save_top_k: 0";
  }
  bool tensorboard = true;
  r.Bool("exp_manager.create_tensorboard_logger", &tensorboard);
  if (!tensorboard) c.notes.push_back("exp_manager.create_tensorboard_logger: false: TensorBoard events are not written");
  c.tensorboard = tensorboard;
  r.Bool("exp_manager.async_save", &k.async_save);
  r.Enum("exp_manager.checkpoint.failure_policy", &k.failure_policy, ParseFailurePolicy);
  r.Bool("exp_manager.checkpoint.verify_checksums", &k.verify_checksums);
  r.Double("exp_manager.checkpoint.coordinator_timeout_s", &k.coordinator_timeout_s);
  r.String("exp_manager.checkpoint.export_hf_dir", &k.export_hf_dir);
  r.String("exp_manager.checkpoint.export_hf_dtype", &k.export_dtype);
  r.String("exp_manager.hf_init_from", &k.hf_init_from);
  r.Int("exp_manager.export_full_model.every_n_train_steps", &k.export_every_n_train_steps);
  r.Bool("exp_manager.export_full_model.save_last", &k.export_save_last);
  r.String("exp_manager.export_full_model.dir", &k.export_dir);
  r.Bool("exp_manager.auto_checkpoint.enabled", &k.auto_interval);
  r.Double("exp_manager.auto_checkpoint.max_overhead", &k.auto_max_overhead);
  r.Double("exp_manager.auto_checkpoint.max_lost_minutes", &k.auto_max_lost_minutes);
  r.Double("exp_manager.auto_checkpoint.min_interval_s", &k.auto_min_interval_s);
}

StatusOr<TrainConfig> ParseDocument(const std::string& text, const std::vector<std::string>& overrides,
                                    const std::string& source, const EnvLookup& env) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: YAML syntax error at line {}, column {}: {}", source, e.mark.line + 1,
                                       e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return InvalidArgument(fmt::format("{}: the top level must be a map", source));
  TrainConfig c;
  HT_RETURN_IF_ERROR(PrepareDocument(root, overrides, env, &c.notes));

  Reader r(root);
  std::string sched = "cosine", unknown_policy = "error";
  std::string fp8_recipe = "delayed", fp8_algo = "max", fp8_grad = "e5m2";
  r.String("hypertrain.unknown_keys", &unknown_policy);
  HT_RETURN_IF_ERROR(CheckUnsupported(r));
  HT_RETURN_IF_ERROR(ApplyShared(r, root, c));
  ReadTrainer(r, c);
  int64_t seed = static_cast<int64_t>(c.seed), depth = c.data.prefetch_depth;
  ReadModel(r, c, &seed);
  PeftKeys peft;
  ReadPeft(r, c.finetune, &peft);
  ReadFp8(r, c.fp8, &fp8_recipe, &fp8_algo, &fp8_grad);
  ReadOptimAndData(r, c, &sched, &depth);
  r.Count("trainer.val_check_interval", &c.validation.check_interval, "an epoch", "optimizer steps");
  r.Count("trainer.limit_val_batches", &c.validation.limit_batches, "the validation set", "batches");
  ReadExpManager(r, c);
  HT_RETURN_IF_ERROR(r.status());

  HT_ASSIGN_OR_RETURN(c.optim.sched, ParseScheduleKind(sched));
  HT_ASSIGN_OR_RETURN(c.fp8.recipe, model::ParseFp8Recipe(fp8_recipe));
  HT_ASSIGN_OR_RETURN(c.fp8.amax_compute_algo, model::ParseAmaxComputeAlgo(fp8_algo));
  HT_ASSIGN_OR_RETURN(c.fp8.grad_format, model::ParseFp8Format(fp8_grad));
  HT_RETURN_IF_ERROR(c.fp8.Validate());
  HT_RETURN_IF_ERROR(ValidateRanges(c, seed, depth));
  HT_RETURN_IF_ERROR(internal::ValidateCuda(c.cuda));
  HT_RETURN_IF_ERROR(FinishPeft(peft, c.finetune.peft));
  c.seed = static_cast<uint64_t>(seed);
  c.data.prefetch_depth = static_cast<int>(depth);
  c.loss_scale.enabled = c.precision == model::Precision::kFP16;
  HT_RETURN_IF_ERROR(ValidateAndFinish(c));

  if (unknown_policy != "error" && unknown_policy != "warn") {
    return InvalidArgument(fmt::format("hypertrain.unknown_keys: '{}' is not one of error, warn", unknown_policy));
  }
  std::vector<std::string> leaves;
  CollectLeaves(root, "", leaves);
  for (const std::string& k : leaves) {
    if (internal::IsKnownKey(k, r.read())) continue;
    const std::string hint = internal::SuggestKey(k, r.read());
    const std::string item = hint.empty() ? k : fmt::format("{} (did you mean {}?)", k, hint);
    if (unknown_policy == "error") {
      // Attributed to where it came from: a --set, or the file.
      bool from_set = false;
      for (const std::string& o : overrides) {
        const std::string key = o.substr(0, o.find('='));
        from_set = from_set || k == key || k.rfind(key + ".", 0) == 0;
      }
      return InvalidArgument(fmt::format("{}: unknown key {}; set hypertrain.unknown_keys: warn to run anyway",
                                         from_set ? "--set" : source, item));
    }
    c.unknown_keys.push_back(item);
  }
  return c;
}

}  // namespace

StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::vector<std::string>& overrides,
                                       const std::string& source, const EnvLookup& env) {
  // The document is checked before it is walked (resolve.cc: DocumentCheck);
  // a conversion yaml-cpp still refuses is a config error, never an abort.
  try {
    return ParseDocument(text, overrides, source, env);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: cannot read the config: {}", source, e.msg));
  }
}

StatusOr<TrainConfig> LoadTrainConfig(const std::string& path, const std::vector<std::string>& overrides,
                                      const EnvLookup& env) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument(fmt::format("--config {}: is a directory, not a YAML file", path));
  }
  std::ifstream f(path);
  if (!f) return InvalidArgument(fmt::format("--config {}: cannot read the file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseTrainConfig(ss.str(), overrides, path, env);
}

namespace {

// `value` as a YAML double-quoted scalar, so that any path survives ApplyOverride.
std::string YamlQuoted(const std::string& value) {
  std::string out = "\"";
  for (char ch : value) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

StatusOr<RunConfigSource> ResolveRunConfig(const std::string& config_flag, const std::vector<std::string>& set_flags,
                                           const EnvLookup& env) {
  RunConfigSource src;
  src.path = config_flag;
  if (src.path.empty()) {
    const char* from_env = env(contract::env::kConfig);
    if (from_env == nullptr || *from_env == '\0') {
      return InvalidArgument(fmt::format("--config is not given and {} is unset", contract::env::kConfig));
    }
    src.path = from_env;
  }
  if (const char* dir = env(contract::env::kCheckpointDir); dir != nullptr && *dir != '\0') {
    for (const char* p = dir; *p != '\0'; ++p) {
      if (static_cast<unsigned char>(*p) < 0x20) {
        return InvalidArgument(fmt::format("{} holds a control character", contract::env::kCheckpointDir));
      }
    }
    src.overrides.push_back("exp_manager.checkpoint_dir=" + YamlQuoted(dir));
  }
  if (const char* text = env(contract::env::kProfile); text != nullptr && *text != '\0') {
    std::string why;
    const std::optional<contract::ProfileRequest> p = contract::DecodeProfile(text, &why);
    if (!p) return InvalidArgument(fmt::format("{}: {}", contract::env::kProfile, why));
    src.overrides.push_back("trainer.profile.start_step=" + std::to_string(p->start_step));
    src.overrides.push_back("trainer.profile.num_steps=" + std::to_string(p->num_steps));
    if (!p->dir.empty()) src.overrides.push_back("trainer.profile.dir=" + YamlQuoted(p->dir));
  }
  src.overrides.insert(src.overrides.end(), set_flags.begin(), set_flags.end());
  return src;
}

StatusOr<CudaConfig> CudaConfigFromEnv(const EnvLookup& env) {
  YAML::Node root(YAML::NodeType::Map);
  std::vector<std::string> notes;
  HT_RETURN_IF_ERROR(PrepareDocument(root, {}, env, &notes));
  Reader r(root);
  CudaConfig cu;
  ReadCuda(r, cu);
  HT_RETURN_IF_ERROR(r.status());
  HT_RETURN_IF_ERROR(internal::ValidateCuda(cu));
  return cu;
}

}  // namespace hypertrain::config
