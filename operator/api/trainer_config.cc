#include "operator/api/trainer_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace hypertrain::api {
namespace {

constexpr char kField[] = "spec.trainerConfig.inline";

Error ConfigError(const std::string& key, const std::string& message) {
  return Error{kField, key.empty() ? message : key + ": " + message};
}

// Reads an optional integer at node[key]; sets *err on a non-integer.
std::optional<int64_t> OptionalInt(const YAML::Node& parent, const char* key,
                                   const std::string& path, std::optional<Error>* err) {
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

const std::vector<std::string>& ShardingStrategies() {
  static const std::vector<std::string> k = {"hybrid_shard", "full_shard", "hybrid_shard_zero2",
                                             "shard_grad_op", "no_shard"};
  return k;
}

Result<TrainerConfigSummary> ValidateTrainerConfig(std::string_view yaml, int nodes,
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
  std::optional<Error> err;
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

  out.sharding_strategy = "hybrid_shard";
  if (YAML::Node s = model["sharding_strategy"]) {
    if (!s.IsScalar()) return ConfigError("model.sharding_strategy", "must be a string");
    const auto& ok = ShardingStrategies();
    if (std::find(ok.begin(), ok.end(), s.Scalar()) == ok.end()) {
      std::string list;
      for (const auto& v : ok) list += (list.empty() ? "" : ", ") + v;
      return ConfigError("model.sharding_strategy", "'" + s.Scalar() + "' is not one of " + list);
    }
    out.sharding_strategy = s.Scalar();
  }

  const int64_t world = static_cast<int64_t>(nodes) * nproc_per_node;
  std::optional<int64_t> degree = OptionalInt(model, "shard_degree", "model.shard_degree", &err);
  if (err) return *err;
  if (degree && *degree == 0) degree.reset();  // the trainer's "0 = default"
  if (degree) {
    if (*degree < 0) return ConfigError("model.shard_degree", "must be >= 0 (0: the strategy's default)");
    if (*degree > world || world % *degree != 0) {
      return ConfigError("model.shard_degree",
                         std::to_string(*degree) + " does not divide the world size " +
                             std::to_string(world) + " (spec.nodes " + std::to_string(nodes) +
                             " x " + std::to_string(nproc_per_node) + " ranks per node)");
    }
    if (out.sharding_strategy == "no_shard" && *degree != 1) {
      return ConfigError("model.shard_degree", "must be 1 (or absent) with no_shard");
    }
    out.shard_degree = *degree;
  } else if (out.sharding_strategy == "hybrid_shard" ||
             out.sharding_strategy == "hybrid_shard_zero2") {
    out.shard_degree = nproc_per_node;
  } else if (out.sharding_strategy == "no_shard") {
    out.shard_degree = 1;
  } else {
    out.shard_degree = world;
  }

  std::optional<int64_t> batch =
      OptionalInt(model, "train_batch_size", "model.train_batch_size", &err);
  if (err) return *err;
  if (batch && *batch <= 0) return ConfigError("model.train_batch_size", "must be > 0");

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
