#include "operator/api/trainer_config.h"

#include <yaml-cpp/yaml.h>

#include "contract/sharding.h"
#include "contract/trainer_config.h"

namespace hypertrain::api {
namespace {

constexpr char kField[] = "spec.trainerConfig.inline";

Status ConfigError(const std::string& key, const std::string& message) {
  return InvalidField(kField, key.empty() ? message : key + ": " + message);
}

// The shape checks the trainer makes only once its pods run.
Status CheckRanges(const contract::SharedTrainerConfig& c) {
  if (c.max_steps <= 0) return ConfigError("trainer.max_steps", "must be > 0");
  if (c.train_batch_size <= 0) return ConfigError("model.train_batch_size", "must be > 0");
  if (c.grad_accumulation_steps <= 0) return ConfigError("model.grad_accumulation_steps", "must be > 0");
  return Status::Ok();
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
  std::string error;
  const std::optional<contract::SharedTrainerConfig> c = contract::ReadSharedTrainerConfig(root, &error);
  if (!c) return ConfigError("", error);
  HT_RETURN_IF_ERROR(CheckRanges(*c));
  TrainerConfigSummary out;
  out.max_steps = c->max_steps;
  if (c->has_num_nodes && c->num_nodes != nodes) {
    return ConfigError("trainer.num_nodes", std::to_string(c->num_nodes) + " disagrees with spec.nodes " +
                                                std::to_string(nodes));
  }
  if (c->has_devices && c->devices != nproc_per_node) {
    return ConfigError("trainer.devices", std::to_string(c->devices) +
                                              " disagrees with the ranks per node " +
                                              std::to_string(nproc_per_node) +
                                              " (spec.nprocPerNode / spec.gpusPerNode)");
  }
  out.sharding_strategy = contract::ShardingStrategyName(c->sharding_strategy);
  const int64_t world = static_cast<int64_t>(nodes) * nproc_per_node;
  std::string why;
  std::optional<int64_t> resolved =
      contract::ResolveShardDegree(c->sharding_strategy, c->shard_degree, world, nproc_per_node, &why);
  if (!resolved) {
    return ConfigError("model.shard_degree", why + " (world: spec.nodes " + std::to_string(nodes) + " x " +
                                                 std::to_string(nproc_per_node) + " ranks per node)");
  }
  out.shard_degree = *resolved;
  out.requested_shard_degree = c->shard_degree;
  out.grad_accumulation_steps = c->grad_accumulation_steps;

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
