#include "operator/api/estimate.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "contract/instance_types.h"
#include "contract/precision.h"
#include "contract/trainer_config.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;

constexpr char kField[] = "spec.trainerConfig.inline";

using contract::ConfigAt;

// Reads keys as the trainer's config reader does: absent or null keeps the
// default; a value of the wrong type is an error naming the key.
class Reader {
 public:
  explicit Reader(YAML::Node root) { root_.reset(root); }
  template <typename T>
  void Read(const std::string& path, T* out) {
    const YAML::Node n = ConfigAt(root_, path);
    if (!n.IsDefined() || n.IsNull() || !status_.ok()) return;
    try {
      if (!n.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "not a scalar");
      *out = n.as<T>();
    } catch (const YAML::Exception&) {
      status_ = InvalidField(kField, path + ": cannot read '" + (n.IsScalar() ? n.Scalar() : "a non-scalar") + "'");
    }
  }
  bool Has(const std::string& path) const { return ConfigAt(root_, path).IsDefined(); }
  const Status& status() const { return status_; }

 private:
  YAML::Node root_;
  Status status_;
};

// model.peft as the trainer reads it (runtime/config: peft_type lora|qlora
// in any case, none/null off; target_modules a list or a comma-separated
// string of q_proj ... down_proj or q ... down; default all seven).
Status ReadPeft(const YAML::Node& root, std::string type, int64_t rank, contract::RunShape::Peft* out) {
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (type.empty() || type == "none" || type == "null") return Status::Ok();
  if (type != "lora" && type != "qlora") {
    return InvalidField(kField, "model.peft.peft_type: '" + type + "' is not one of lora, qlora, none");
  }
  if (rank < 1) return InvalidField(kField, "model.peft.rank must be >= 1");
  static const char* kAll[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  std::vector<std::string> names;
  const YAML::Node t = ConfigAt(root, "model.peft.target_modules");
  if (t.IsSequence()) {
    for (const YAML::Node& n : t) names.push_back(n.IsScalar() ? n.Scalar() : std::string("?"));
  } else if (t.IsScalar()) {
    std::string item;
    for (char c : t.Scalar() + ",") {
      if (c == ',') {
        if (!item.empty()) names.push_back(item);
        item.clear();
      } else if (c != ' ' && c != '[' && c != ']') {
        item += c;
      }
    }
  }
  out->type = type;
  out->rank = rank;
  out->targets.clear();
  if (names.empty()) out->targets.assign(std::begin(kAll), std::end(kAll));
  for (const std::string& n : names) {
    const std::string full = n.size() > 5 && n.compare(n.size() - 5, 5, "_proj") == 0 ? n : n + "_proj";
    if (std::find(std::begin(kAll), std::end(kAll), full) == std::end(kAll)) {
      return InvalidField(kField, "model.peft.target_modules: '" + n + "' is not one of q_proj, k_proj, "
                                  "v_proj, o_proj, gate_proj, up_proj, down_proj");
    }
    if (std::find(out->targets.begin(), out->targets.end(), full) == out->targets.end()) {
      out->targets.push_back(full);
    }
  }
  return Status::Ok();
}

std::string Gib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", static_cast<double>(bytes) / (1 << 30));
  return b;
}

std::string Fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof(b), "%.*f", digits, v);
  return b;
}

std::string Duration(double s) {
  if (s >= 2 * 86400) return Fixed(s / 86400, 1) + " days";
  if (s >= 2 * 3600) return Fixed(s / 3600, 1) + " hours";
  if (s >= 120) return Fixed(s / 60, 1) + " minutes";
  return Fixed(s, 0) + " s";
}

json Memory(const contract::MemoryParts& m) {
  return {{"weights", m.weights},         {"master", m.master},
          {"gradients", m.gradients},     {"optimizer", m.optimizer},
          {"unitPool", m.unit_pool},      {"activations", m.activations},
          {"workspace", m.workspace},     {"embeddingGather", m.embedding_gather},
          {"buffers", m.buffers},         {"frozenBase", m.frozen_base},
          {"allocated", m.allocated()},
          {"overhead", m.overhead + m.transient}, {"inUse", m.in_use()}};
}

}  // namespace

StatusOr<contract::RunShape> RunShapeFromTrainerConfig(std::string_view yaml, int nodes, int ranks_per_node,
                                                       bool gpus) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidField(kField, "not valid YAML: " + e.msg);
  }
  std::string error;
  const std::optional<contract::SharedTrainerConfig> c = contract::ReadSharedTrainerConfig(root, &error);
  if (!c) return InvalidField(kField, error);
  contract::RunShape run;
  run.model = c->model;
  run.seq_len = c->max_context_width;
  run.micro_batch = c->train_batch_size;
  run.grad_accumulation = c->grad_accumulation_steps;
  run.precision = c->precision;
  run.checkpointing = c->activation_checkpointing;
  run.strategy = c->sharding_strategy;
  run.shard_degree = c->shard_degree;
  // The estimate's own keys (the trainer reads them in runtime/config).
  Reader r(root);
  r.Read("trainer.deterministic", &run.deterministic);
  r.Read("model.fp8", &run.fp8);
  int64_t depth = 2;
  r.Read("model.data.prefetch_depth", &depth);
  std::string backend = "auto";
  r.Read("trainer.backend", &backend);
  // PEFT (the trainer's model.peft keys, PEFT's own names r too): the
  // adapters' state and the frozen base sharded over the shard group.
  std::string peft;
  r.Read("model.peft.peft_type", &peft);
  int64_t peft_rank = 8;
  r.Read("model.peft.rank", &peft_rank);
  r.Read("model.peft.r", &peft_rank);
  bool fp8_base = false;
  r.Read("model.peft.fp8_base", &fp8_base);
  HT_RETURN_IF_ERROR(r.status());
  HT_RETURN_IF_ERROR(ReadPeft(root, peft, peft_rank, &run.peft));
  run.peft.fp8_base = fp8_base && !run.peft.type.empty();
  run.prefetch_depth = static_cast<int>(depth);
  run.nodes = nodes;
  run.gpus_per_node = ranks_per_node;
  run.device = gpus && backend != "cpu" ? contract::Device::kCuda : contract::Device::kCpu;
  if (std::string e = contract::ValidateRunShape(run); !e.empty()) return InvalidField(kField, e);
  return run;
}

StatusOr<json> EstimateJob(const TrainingJobSpec& spec) {
  if (!spec.trainer_config.inline_yaml) {
    return FailedPrecondition(
        "spec.trainerConfig.configMapRef: the operator estimates inline configs only; run "
        "`hypertrain estimate --config <file>` on the ConfigMap's content");
  }
  HT_ASSIGN_OR_RETURN(contract::RunShape run,
                      RunShapeFromTrainerConfig(*spec.trainer_config.inline_yaml, spec.nodes,
                                                spec.nproc_per_node, spec.gpus_per_node > 0));
  contract::EstimateOptions o;
  if (!spec.instance_type.empty()) o.instance = contract::LookupInstanceType(spec.instance_type);
  const int64_t max_steps = spec.trainer_config.summary ? spec.trainer_config.summary->max_steps : contract::kDefaultMaxSteps;
  o.tokens = static_cast<double>(max_steps) * static_cast<double>(run.tokens_per_step());
  std::string error;
  const std::optional<contract::Estimate> e = contract::MakeEstimate(run, o, &error);
  if (!e) return InvalidField(kField, error);

  json j;
  j["parameters"] = e->params.total;
  j["flopsPerToken"] = e->flops.model_per_token;
  j["worldSize"] = run.world();
  j["shardingStrategy"] = contract::ShardingStrategyName(e->sharding.strategy);
  j["shardDegree"] = e->sharding.shard_degree;
  j["memoryPerGpu"] = Memory(e->memory);
  std::string fit_text = Gib(e->memory.in_use()) + " GiB per GPU in use";
  if (o.instance && run.device == contract::Device::kCuda) {
    const contract::FitCheck& f = e->fit.front();
    j["gpuMemory"] = f.have;
    j["fits"] = f.fits;
    fit_text = Gib(f.need) + " of " + Gib(f.have) + " GiB per GPU (" + f.instance.gpu_model + ")" +
               (f.fits ? (f.tight ? ": fits, tight" : ": fits") : ": DOES NOT FIT");
    json alts = json::array();
    for (const auto& a : e->alternatives) {
      std::string sets;
      for (const std::string& kv : a.sets) sets += (sets.empty() ? "" : " ") + kv;
      alts.push_back(sets);
    }
    if (!alts.empty()) j["fitsWith"] = alts;
  } else if (run.device == contract::Device::kCuda) {
    fit_text += " (no known instanceType: fit not checked)";
  }
  j["mfu"] = e->mfu;
  j["mfuSource"] = e->mfu_source;
  j["tokensPerSecond"] = e->tokens_per_s;
  j["stepSeconds"] = e->step_seconds;
  j["maxSteps"] = max_steps;
  j["tokens"] = *e->tokens;
  j["seconds"] = e->seconds;
  j["gpuHours"] = e->gpu_hours;
  j["message"] = Fixed(static_cast<double>(e->params.total) / 1e9, 2) + " B parameters on " +
                 std::to_string(run.world()) + " ranks (" + contract::ShardingStrategyName(e->sharding.strategy) +
                 ", shard degree " + std::to_string(e->sharding.shard_degree) + "): " + fit_text + "; ~" +
                 Fixed(e->tokens_per_s, 0) + " tokens/s at " + Fixed(100 * e->mfu, 1) + "% MFU; " +
                 std::to_string(max_steps) + " steps in " + Duration(e->seconds) + " (" +
                 Fixed(e->gpu_hours, e->gpu_hours < 10 ? 2 : 0) + " GPU-hours)";
  return j;
}

}  // namespace hypertrain::api
