#include "contract/trainer_config.h"

namespace hypertrain::contract {

YAML::Node ConfigAt(const YAML::Node& root, const std::string& path) {
  YAML::Node n;
  n.reset(root);
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& cn = n;
    YAML::Node child = cn[part];
    if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(child);
    if (dot == std::string::npos) return n;
    start = dot + 1;
  }
}

namespace {

bool Given(const YAML::Node& root, const std::string& path) {
  const YAML::Node n = ConfigAt(root, path);
  return n.IsDefined() && !n.IsNull();
}

// Typed reads as the trainer's config reader does them: absent or null keeps
// the default; the first bad value is kept in error_.
class Reader {
 public:
  explicit Reader(const YAML::Node& root) { root_.reset(root); }
  void Int(const std::string& path, int64_t* out) { Scalar(path, out, "an integer"); }
  void String(const std::string& path, std::string* out) { Scalar(path, out, "a string"); }
  // YAML 1.1 booleans, and 0/1 (environment overrides).
  void Bool(const std::string& path, bool* out) {
    const YAML::Node n = ConfigAt(root_, path);
    if (n.IsScalar() && (n.Scalar() == "0" || n.Scalar() == "1")) {
      *out = n.Scalar() == "1";
      return;
    }
    Scalar(path, out, "true or false");
  }
  void Fail(std::string e) {
    if (error_.empty()) error_ = std::move(e);
  }
  const std::string& error() const { return error_; }

 private:
  template <typename T>
  void Scalar(const std::string& path, T* out, const char* what) {
    const YAML::Node n = ConfigAt(root_, path);
    if (!n.IsDefined() || n.IsNull()) return;
    if (!n.IsScalar()) {
      Fail(path + ": expected " + what + ", got a " + (n.IsMap() ? "map" : "list"));
      return;
    }
    try {
      *out = n.as<T>();
    } catch (const YAML::Exception&) {
      Fail(path + ": '" + n.Scalar() + "' is not " + what);
    }
  }
  YAML::Node root_;
  std::string error_;
};

constexpr char kCheckpointing[] = "model.activation_checkpointing";

// none|selective|full, or a YAML 1.1 boolean (HyperPod: True = full, False =
// none); a quoted "true" is a string and read by name.
void ReadCheckpointing(const YAML::Node& root, Reader& r, Checkpointing* out) {
  const YAML::Node n = ConfigAt(root, kCheckpointing);
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsScalar()) {
    r.Fail(std::string(kCheckpointing) + ": expected none, selective, full, true or false");
    return;
  }
  bool b;
  if (n.Tag() != "!" && YAML::convert<bool>::decode(n, b)) {
    *out = b ? Checkpointing::kFull : Checkpointing::kNone;
    return;
  }
  const std::optional<Checkpointing> c = ParseCheckpointing(n.Scalar());
  if (!c) {
    r.Fail(std::string(kCheckpointing) + ": '" + n.Scalar() +
           "' is not one of none, selective, full, true (= full), false (= none)");
    return;
  }
  *out = *c;
}

void ReadShape(const YAML::Node& root, Reader& r, SharedTrainerConfig& c) {
  r.String("model.shape", &c.shape);
  const std::optional<NamedShape> named = NamedModelShape(c.shape.empty() ? "tiny" : c.shape);
  if (!named) {
    r.Fail("model.shape: '" + c.shape + "' is not one of tiny, 125m, 1b, 8b");
    return;
  }
  c.model = named->model;
  c.max_context_width = named->max_context_width;
  ModelShape& m = c.model;
  r.Int("model.vocab_size", &m.vocab_size);
  r.Int("model.hidden_size", &m.hidden_size);
  r.Int("model.num_hidden_layers", &m.num_hidden_layers);
  r.Int("model.num_attention_heads", &m.num_attention_heads);
  r.Int("model.num_key_value_heads", &m.num_key_value_heads);
  r.Int("model.intermediate_size", &m.intermediate_size);
  r.Int("model.max_context_width", &c.max_context_width);
  if (c.shape.empty() && !Given(root, "model.tie_word_embeddings")) {
    for (const char* k : {"model.vocab_size", "model.hidden_size", "model.num_hidden_layers",
                          "model.intermediate_size"}) {
      if (Given(root, k)) m.tie_word_embeddings = false;
    }
  }
  r.Bool("model.tie_word_embeddings", &m.tie_word_embeddings);
}

}  // namespace

const std::vector<std::string>& SharedTrainerConfigKeys() {
  static const std::vector<std::string> kKeys = {
      "trainer.max_steps",         "trainer.num_nodes",
      "trainer.devices",           "model.precision",
      "trainer.precision",         "model.shape",
      "model.vocab_size",          "model.hidden_size",
      "model.num_hidden_layers",   "model.num_attention_heads",
      "model.num_key_value_heads", "model.intermediate_size",
      "model.max_context_width",   "model.tie_word_embeddings",
      "model.train_batch_size",    "model.micro_batch_size",
      "model.grad_accumulation_steps", "model.gradient_accumulation_steps",
      kCheckpointing,              "model.sharding_strategy",
      "model.shard_degree",
  };
  return kKeys;
}

std::optional<SharedTrainerConfig> ReadSharedTrainerConfig(const YAML::Node& root, std::string* error) {
  SharedTrainerConfig c;
  Reader r(root);
  std::string precision = PrecisionName(c.precision);
  std::string strategy = ShardingStrategyName(c.sharding_strategy);
  try {
    r.Int("trainer.max_steps", &c.max_steps);
    c.has_num_nodes = Given(root, "trainer.num_nodes");
    c.has_devices = Given(root, "trainer.devices");
    r.Int("trainer.num_nodes", &c.num_nodes);
    r.Int("trainer.devices", &c.devices);
    r.String("model.precision", &precision);
    r.String("trainer.precision", &precision);
    ReadShape(root, r, c);
    r.Int("model.train_batch_size", &c.train_batch_size);
    r.Int("model.micro_batch_size", &c.train_batch_size);
    r.Int("model.grad_accumulation_steps", &c.grad_accumulation_steps);
    r.Int("model.gradient_accumulation_steps", &c.grad_accumulation_steps);
    ReadCheckpointing(root, r, &c.activation_checkpointing);
    r.String("model.sharding_strategy", &strategy);
    r.Int("model.shard_degree", &c.shard_degree);
  } catch (const YAML::Exception& e) {
    r.Fail("cannot read the config: " + e.msg);
  }
  if (r.error().empty()) {
    if (const std::optional<Precision> p = ParsePrecision(precision)) {
      c.precision = *p;
    } else {
      r.Fail("trainer.precision: '" + precision + "' is not one of bf16, fp16, fp32, tf32");
    }
  }
  if (r.error().empty()) {
    if (const std::optional<ShardingStrategy> s = ParseShardingStrategy(strategy)) {
      c.sharding_strategy = *s;
    } else {
      r.Fail("model.sharding_strategy: " + UnknownShardingStrategyMessage(strategy));
    }
  }
  if (!r.error().empty()) {
    if (error != nullptr) *error = r.error();
    return std::nullopt;
  }
  return c;
}

}  // namespace hypertrain::contract
