#include "runtime/config/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "contract/env.h"
#include "contract/sharding.h"

namespace hypertrain::config {
namespace {

// Keys other components read from TrainConfig::raw (or that HyperPod recipes
// carry and hypertrain ignores). "x.*" accepts a whole subtree.
const char* const kExtraKnownKeys[] = {
    // HyperPod recipe keys with no meaning here.
    "run.*", "use_smp_model", "distributed_backend", "trainer.accelerator",
    "trainer.val_check_interval", "trainer.limit_val_batches", "model.model_type",
    "model.val_batch_size", "model.log_reduced_training_loss", "model.tensor_model_parallel_degree",
    "model.expert_model_parallel_degree", "model.context_parallel_degree", "model.moe",
    "model.activation_loading_horizon", "model.delayed_param", "model.offload_activations",
    "model.hf_model_name_or_path", "model.hf_access_token", "model.use_flash_attention",
    "model.initializer_range", "model.max_position_embeddings", "model.lr_decay_iters",
    "model.precision", "model.data.val_dir", "model.data.dataset_type", "model.viztracer.*",
    "model.optim.sched.constant_steps", "model.rope_scaling.rope_type",
    "exp_manager.name", "exp_manager.create_tensorboard_logger",
    "exp_manager.create_checkpoint_callback", "exp_manager.export_full_model.*",
    "exp_manager.auto_checkpoint.*", "exp_manager.checkpoint_callback_params.*",
    // CUDA backend (runtime/cmd/cuda_parts.cc).
    "trainer.cuda_graphs",
    // Sharding / distributed (runtime/parallel).
    "model.forward_prefetch", "model.backward_prefetch", "model.limit_all_gathers",
    "model.reduce_dtype", "distributed.*",
    // Checkpointing (runtime/checkpoint).
    "exp_manager.checkpoint.*", "exp_manager.save_on_error", "exp_manager.async_save",
    "exp_manager.hf_init_from",
};

bool IsKnown(const std::string& path, const std::set<std::string>& read) {
  if (read.count(path)) return true;
  for (const char* k : kExtraKnownKeys) {
    const std::string key(k);
    if (key == path) return true;
    if (key.size() > 2 && key.compare(key.size() - 2, 2, ".*") == 0) {
      const std::string prefix = key.substr(0, key.size() - 1);  // "x."
      if (path == key.substr(0, key.size() - 2) || path.rfind(prefix, 0) == 0) return true;
    }
  }
  return false;
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  std::string p;
  while (std::getline(ss, p, '.')) parts.push_back(p);
  return parts;
}

YAML::Node Lookup(const YAML::Node& root, const std::string& path) {
  YAML::Node n;
  n.reset(root);
  for (const std::string& part : Split(path)) {
    if (!n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& cn = n;
    YAML::Node child = cn[part];
    if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(child);
  }
  return n;
}

void CollectLeaves(const YAML::Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (!n.IsMap()) {
    out.push_back(prefix);
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    CollectLeaves(it->second, prefix.empty() ? k : prefix + "." + k, out);
  }
}

// Reads typed values by dotted path, remembering every path it was asked for
// and keeping the first error.
class Reader {
 public:
  explicit Reader(YAML::Node root) { root_.reset(root); }
  const std::set<std::string>& read() const { return read_; }
  Status status() const { return status_; }
  bool Has(const std::string& path) {
    read_.insert(path);
    const YAML::Node n = Lookup(root_, path);
    return n.IsDefined() && !n.IsNull();
  }
  void Int(const std::string& path, int64_t* out) { Scalar(path, out, "an integer"); }
  void Double(const std::string& path, double* out) { Scalar(path, out, "a number"); }
  void Bool(const std::string& path, bool* out) { Scalar(path, out, "true or false"); }
  void String(const std::string& path, std::string* out) { Scalar(path, out, "a string"); }
  void Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  YAML::Node Node(const std::string& path) {
    read_.insert(path);
    return Lookup(root_, path);
  }

 private:
  template <typename T>
  void Scalar(const std::string& path, T* out, const char* what) {
    read_.insert(path);
    const YAML::Node n = Lookup(root_, path);
    if (!n.IsDefined() || n.IsNull()) return;
    if (!n.IsScalar()) {
      Fail(InvalidArgument(fmt::format("{}: expected {}, got a {}", path, what,
                                       n.IsMap() ? "map" : "list")));
      return;
    }
    try {
      *out = n.as<T>();
    } catch (const YAML::Exception&) {
      Fail(InvalidArgument(fmt::format("{}: '{}' is not {}", path, n.Scalar(), what)));
    }
  }
  YAML::Node root_;
  std::set<std::string> read_;
  Status status_;
};

Status ApplyOverride(YAML::Node& root, const std::string& kv) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument(fmt::format("--set '{}': expected key.path=value", kv));
  }
  const std::string path = kv.substr(0, eq), text = kv.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("--set {}: value '{}' is not valid YAML: {}", path, text, e.msg));
  }
  const std::vector<std::string> parts = Split(path);
  YAML::Node n;
  n.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].empty()) return InvalidArgument(fmt::format("--set '{}': empty key segment", kv));
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

template <typename T>
Status Check(bool ok, const std::string& key, T value, const std::string& rule) {
  if (ok) return Status::Ok();
  return InvalidArgument(fmt::format("{}: {} {}", key, value, rule));
}

}  // namespace

StatusOr<TrainConfig> ParseTrainConfig(const std::string& text,
                                       const std::vector<std::string>& overrides,
                                       const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: YAML syntax error at line {}, column {}: {}", source,
                                       e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return InvalidArgument(fmt::format("{}: the top level must be a map", source));
  for (const std::string& o : overrides) HT_RETURN_IF_ERROR(ApplyOverride(root, o));

  TrainConfig c;
  c.raw = root;
  Reader r(root);
  // trainer
  r.Int("trainer.max_steps", &c.max_steps);
  std::string precision = "bf16";
  r.String("model.precision", &precision);
  r.String("trainer.precision", &precision);
  r.Int("trainer.log_every_n_steps", &c.log_every_n_steps);
  r.Bool("trainer.deterministic", &c.deterministic);
  r.String("trainer.backend", &c.backend);
  r.Double("trainer.peak_tflops", &c.peak_tflops);
  r.Int("trainer.devices", &c.devices);
  r.Int("trainer.num_nodes", &c.num_nodes);
  r.Double("trainer.loss_scale.initial_scale", &c.loss_scale.initial_scale);
  r.Int("trainer.loss_scale.growth_interval", &c.loss_scale.growth_interval);
  r.Double("trainer.loss_scale.growth_factor", &c.loss_scale.growth_factor);
  r.Double("trainer.loss_scale.backoff_factor", &c.loss_scale.backoff_factor);
  r.Double("trainer.loss_scale.min_scale", &c.loss_scale.min_scale);
  r.Double("trainer.collective_timeout", &c.collective_timeout_s);
  // model shape: named base, then explicit fields.
  r.String("model.shape", &c.shape);
  if (!c.shape.empty()) {
    auto named = model::NamedModelConfig(c.shape);
    if (!named.ok()) {
      return InvalidArgument(fmt::format("model.shape: '{}' is not one of tiny, 125m, 1b, 8b", c.shape));
    }
    c.model = *named;
  } else {
    c.model = *model::NamedModelConfig("tiny");
  }
  model::ModelConfig& m = c.model;
  r.Int("model.vocab_size", &m.vocab_size);
  r.Int("model.hidden_size", &m.hidden_size);
  r.Int("model.num_hidden_layers", &m.num_hidden_layers);
  r.Int("model.num_attention_heads", &m.num_attention_heads);
  r.Int("model.num_key_value_heads", &m.num_key_value_heads);
  r.Int("model.intermediate_size", &m.intermediate_size);
  r.Int("model.max_context_width", &m.max_context_width);
  r.Double("model.rope_theta", &m.rope_theta);
  r.Double("model.rms_norm_eps", &m.rms_norm_eps);
  r.Double("model.layernorm_epsilon", &m.rms_norm_eps);  // HyperPod's name
  r.Bool("model.tie_word_embeddings", &m.tie_word_embeddings);
  if (r.Has("model.rope_scaling")) {
    const YAML::Node rs = r.Node("model.rope_scaling");
    if (!rs.IsMap()) {
      r.Fail(InvalidArgument("model.rope_scaling: expected a map {rope_type, factor, ...} or null"));
    } else {
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
      r.Int("model.rope_scaling.original_max_position_embeddings",
            &m.rope_scaling.original_max_position_embeddings);
    }
  } else if (r.Node("model.rope_scaling").IsDefined()) {  // rope_scaling: null
    m.rope_scaling.type = model::RopeScalingType::kNone;
  }
  r.Int("model.train_batch_size", &c.train_batch_size);
  r.Int("model.micro_batch_size", &c.train_batch_size);
  r.Int("model.grad_accumulation_steps", &c.grad_accumulation_steps);
  r.Int("model.gradient_accumulation_steps", &c.grad_accumulation_steps);
  r.Double("model.grad_clip", &c.grad_clip);
  std::string ckpt = "none";
  r.String("model.activation_checkpointing", &ckpt);
  r.String("model.sharding_strategy", &c.sharding_strategy);
  r.Int("model.shard_degree", &c.shard_degree);
  r.Double("model.collective_timeout", &c.collective_timeout_s);
  int64_t seed = static_cast<int64_t>(c.seed);
  r.Int("model.seed", &seed);
  // FP8 (HyperPod recipe keys plus hypertrain's own; runtime/model/fp8.h).
  std::string fp8_recipe = "delayed", fp8_algo = "max", fp8_grad = "e5m2";
  r.Bool("model.fp8", &c.fp8.enabled);
  r.String("model.fp8_recipe", &fp8_recipe);
  r.Int("model.fp8_amax_history_len", &c.fp8.amax_history_len);
  r.String("model.fp8_amax_compute_algo", &fp8_algo);
  r.Int("model.fp8_margin", &c.fp8.margin);
  r.String("model.fp8_grad_format", &fp8_grad);
  r.Bool("model.fp8_lm_head", &c.fp8.lm_head);
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
    } catch (const YAML::Exception&) {
      r.Fail(InvalidArgument("model.optim.betas: expected a list of two numbers, e.g. [0.9, 0.95]"));
    }
  }
  std::string sched = "cosine";
  r.String("model.optim.sched.name", &sched);
  r.Int("model.optim.sched.warmup_steps", &o.warmup_steps);
  r.Double("model.optim.sched.min_lr", &o.min_lr);
  r.String("model.data.train_dir", &c.data.train_dir);
  r.Bool("model.data.use_synthetic_data", &c.data.use_synthetic_data);
  r.String("model.data.tokenizer", &c.data.tokenizer);
  int64_t depth = c.data.prefetch_depth;
  r.Int("model.data.prefetch_depth", &depth);
  r.String("exp_manager.exp_dir", &c.exp_dir);
  r.String("exp_manager.checkpoint_dir", &c.checkpoint_dir);
  r.String("exp_manager.resume_from_checkpoint", &c.resume_from_checkpoint);
  r.Int("exp_manager.every_n_train_steps", &c.every_n_train_steps);
  r.Double("exp_manager.every_n_minutes", &c.every_n_minutes);
  r.Int("exp_manager.save_top_k", &c.save_top_k);
  r.Bool("exp_manager.start_fresh", &c.start_fresh);
  HT_RETURN_IF_ERROR(r.status());

  // Enumerations and ranges.
  HT_ASSIGN_OR_RETURN(c.precision, model::ParsePrecision(precision));
  HT_ASSIGN_OR_RETURN(c.activation_checkpointing, model::ParseCheckpointing(ckpt));
  HT_ASSIGN_OR_RETURN(o.sched, train::ParseScheduleKind(sched));
  HT_ASSIGN_OR_RETURN(c.fp8.recipe, model::ParseFp8Recipe(fp8_recipe));
  HT_ASSIGN_OR_RETURN(c.fp8.amax_compute_algo, model::ParseAmaxComputeAlgo(fp8_algo));
  HT_ASSIGN_OR_RETURN(c.fp8.grad_format, model::ParseFp8Format(fp8_grad));
  HT_RETURN_IF_ERROR(c.fp8.Validate());
  if (c.fp8.enabled && c.precision != model::Precision::kBF16) {
    return InvalidArgument(fmt::format(
        "model.fp8: FP8 GEMMs run inside bf16 training; trainer.precision is {} (use bf16)",
        model::PrecisionName(c.precision)));
  }
  if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda") {
    return InvalidArgument(fmt::format("trainer.backend: '{}' is not one of auto, cpu, cuda", c.backend));
  }
  if (!contract::ParseShardingStrategy(c.sharding_strategy)) {
    return InvalidArgument("model.sharding_strategy: " + contract::UnknownShardingStrategyMessage(c.sharding_strategy));
  }
  if (o.name != "adamw" && o.name != "AdamW") {
    return InvalidArgument(fmt::format("model.optim.name: '{}' is not one of adamw", o.name));
  }
  HT_RETURN_IF_ERROR(Check(c.max_steps >= 1, "trainer.max_steps", c.max_steps, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.log_every_n_steps >= 1, "trainer.log_every_n_steps", c.log_every_n_steps, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.peak_tflops >= 0, "trainer.peak_tflops", c.peak_tflops, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.devices >= 1, "trainer.devices", c.devices, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.num_nodes >= 1, "trainer.num_nodes", c.num_nodes, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.loss_scale.initial_scale > 0, "trainer.loss_scale.initial_scale", c.loss_scale.initial_scale, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(c.loss_scale.growth_interval >= 1, "trainer.loss_scale.growth_interval", c.loss_scale.growth_interval, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.train_batch_size >= 1, "model.train_batch_size", c.train_batch_size, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.grad_accumulation_steps >= 1, "model.grad_accumulation_steps", c.grad_accumulation_steps, "must be >= 1"));
  HT_RETURN_IF_ERROR(Check(c.grad_clip >= 0, "model.grad_clip", c.grad_clip, "must be >= 0 (0 = off)"));
  HT_RETURN_IF_ERROR(Check(c.shard_degree >= 0, "model.shard_degree", c.shard_degree, "must be >= 0 (0 = one node)"));
  HT_RETURN_IF_ERROR(Check(c.collective_timeout_s > 0, "model.collective_timeout", c.collective_timeout_s, "must be > 0 seconds"));
  HT_RETURN_IF_ERROR(Check(seed >= 0, "model.seed", seed, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.lr > 0, "model.optim.lr", o.lr, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(o.weight_decay >= 0, "model.optim.weight_decay", o.weight_decay, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.beta1 >= 0 && o.beta1 < 1, "model.optim.betas[0]", o.beta1, "must be in [0, 1)"));
  HT_RETURN_IF_ERROR(Check(o.beta2 >= 0 && o.beta2 < 1, "model.optim.betas[1]", o.beta2, "must be in [0, 1)"));
  HT_RETURN_IF_ERROR(Check(o.eps > 0, "model.optim.eps", o.eps, "must be > 0"));
  HT_RETURN_IF_ERROR(Check(o.warmup_steps >= 0, "model.optim.sched.warmup_steps", o.warmup_steps, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(o.min_lr >= 0 && o.min_lr <= o.lr, "model.optim.sched.min_lr", o.min_lr, "must be in [0, model.optim.lr]"));
  HT_RETURN_IF_ERROR(Check(depth >= 1 && depth <= 64, "model.data.prefetch_depth", depth, "must be in [1, 64]"));
  HT_RETURN_IF_ERROR(Check(c.every_n_train_steps >= 0, "exp_manager.every_n_train_steps", c.every_n_train_steps, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.every_n_minutes >= 0, "exp_manager.every_n_minutes", c.every_n_minutes, "must be >= 0"));
  HT_RETURN_IF_ERROR(Check(c.save_top_k >= 1, "exp_manager.save_top_k", c.save_top_k, "must be >= 1"));
  if (!c.data.use_synthetic_data && c.data.train_dir.empty()) {
    return InvalidArgument("model.data.train_dir: required unless model.data.use_synthetic_data is true");
  }
  HT_RETURN_IF_ERROR(m.Validate());
  c.seed = static_cast<uint64_t>(seed);
  c.data.prefetch_depth = static_cast<int>(depth);
  c.loss_scale.enabled = c.precision == model::Precision::kFP16;
  if (c.checkpoint_dir.empty()) c.checkpoint_dir = c.exp_dir + "/checkpoints";

  std::vector<std::string> leaves;
  CollectLeaves(root, "", leaves);
  for (const std::string& k : leaves) {
    if (!IsKnown(k, r.read())) c.unknown_keys.push_back(k);
  }
  return c;
}

StatusOr<TrainConfig> LoadTrainConfig(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  std::ifstream f(path);
  if (!f) return InvalidArgument(fmt::format("--config {}: cannot read the file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseTrainConfig(ss.str(), overrides, path);
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
  src.overrides.insert(src.overrides.end(), set_flags.begin(), set_flags.end());
  return src;
}

}  // namespace hypertrain::config
