#include "operator/api/trainer_config.h"

#include <yaml-cpp/yaml.h>

#include "contract/sharding.h"

namespace hypertrain::api {
namespace {

constexpr char kField[] = "spec.trainerConfig.inline";

Status ConfigError(const std::string& key, const std::string& message) {
  return InvalidField(kField, key.empty() ? message : key + ": " + message);
}

// Reads an optional integer at node[key]; sets *err on a non-integer.
std::optional<int64_t> OptionalInt(const YAML::Node& parent, const char* key,
                                   const std::string& path, std::optional<Status>* err) {
  YAML::Node n = parent[key];
  if (!n) return std::nullopt;
  if (!n.IsScalar()) {
    *err = ConfigError(path, "must be an integer");
    return std::nullopt;
  }
  try {
    return n.as<int64_t>();
  } catch (const YAML::Exception&) {
    *err = ConfigError(path, "must be an integer, got '" + n.Scalar() + "'");
    return std::nullopt;
  }
}

}  // namespace

StatusOr<TrainerConfigSummary> ValidateTrainerConfig(std::string_view yaml, int nodes,
                                                     int nproc_per_node) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return ConfigError("", "not valid YAML: " + e.msg + " (line " + std::to_string(e.mark.line + 1) +
                               ", column " + std::to_string(e.mark.column + 1) + ")");
  }
  if (!root.IsMap()) return ConfigError("", "must be a YAML mapping with trainer: and model: sections");
  for (const char* section : {"trainer", "model"}) {
    if (!root[section]) return ConfigError(section, "required section is missing");
    if (!root[section].IsMap()) return ConfigError(section, "must be a mapping");
  }
  const YAML::Node trainer = root["trainer"];
  const YAML::Node model = root["model"];
  std::optional<Status> err;
  TrainerConfigSummary out;

  std::optional<int64_t> max_steps = OptionalInt(trainer, "max_steps", "trainer.max_steps", &err);
  if (err) return *err;
  if (max_steps && *max_steps <= 0) return ConfigError("trainer.max_steps", "must be > 0");
  out.max_steps = max_steps.value_or(kDefaultMaxSteps);

  std::optional<int64_t> num_nodes = OptionalInt(trainer, "num_nodes", "trainer.num_nodes", &err);
  if (err) return *err;
  if (num_nodes && *num_nodes != nodes) {
    return ConfigError("trainer.num_nodes", std::to_string(*num_nodes) + " disagrees with spec.nodes " +
                                                std::to_string(nodes));
  }
  std::optional<int64_t> devices = OptionalInt(trainer, "devices", "trainer.devices", &err);
  if (err) return *err;
  if (devices && *devices != nproc_per_node) {
    return ConfigError("trainer.devices", std::to_string(*devices) +
                                              " disagrees with the ranks per node " +
                                              std::to_string(nproc_per_node) +
                                              " (spec.nprocPerNode / spec.gpusPerNode)");
  }

  contract::ShardingStrategy strategy = contract::kDefaultShardingStrategy;
  if (YAML::Node s = model["sharding_strategy"]) {
    if (!s.IsScalar()) return ConfigError("model.sharding_strategy", "must be a string");
    std::optional<contract::ShardingStrategy> parsed = contract::ParseShardingStrategy(s.Scalar());
    if (!parsed) return ConfigError("model.sharding_strategy", contract::UnknownShardingStrategyMessage(s.Scalar()));
    strategy = *parsed;
  }
  out.sharding_strategy = contract::ShardingStrategyName(strategy);

  const int64_t world = static_cast<int64_t>(nodes) * nproc_per_node;
  std::optional<int64_t> degree = OptionalInt(model, "shard_degree", "model.shard_degree", &err);
  if (err) return *err;
  std::string why;
  std::optional<int64_t> resolved = contract::ResolveShardDegree(strategy, degree.value_or(0), world, nproc_per_node, &why);
  if (!resolved) {
    return ConfigError("model.shard_degree", why + " (world: spec.nodes " + std::to_string(nodes) + " x " +
                                                 std::to_string(nproc_per_node) + " ranks per node)");
  }
  out.shard_degree = *resolved;
  out.requested_shard_degree = degree.value_or(0);

  std::optional<int64_t> batch =
      OptionalInt(model, "train_batch_size", "model.train_batch_size", &err);
  if (err) return *err;
  if (batch && *batch <= 0) return ConfigError("model.train_batch_size", "must be > 0");
  // The trainer reads either spelling (the second wins when both are given).
  for (const char* key : {"grad_accumulation_steps", "gradient_accumulation_steps"}) {
    const std::string path = std::string("model.") + key;
    std::optional<int64_t> accum = OptionalInt(model, key, path, &err);
    if (err) return *err;
    if (accum && *accum <= 0) return ConfigError(path, "must be > 0");
    if (accum) out.grad_accumulation_steps = *accum;
  }

  if (YAML::Node exp = root["exp_manager"]) {
    if (!exp.IsMap()) return ConfigError("exp_manager", "must be a mapping");
    if (YAML::Node dir = exp["checkpoint_dir"]) {
      if (!dir.IsScalar() || dir.Scalar().empty()) {
        return ConfigError("exp_manager.checkpoint_dir", "must be a non-empty path");
      }
      out.checkpoint_dir = dir.Scalar();
    }
  }
  return out;
}

}  // namespace hypertrain::api
