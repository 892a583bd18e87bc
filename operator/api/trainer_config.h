#pragma once
// Checks the trainer's YAML config (HyperPod recipe layout: trainer:, model:,
// exp_manager:) against the job's shape before anything is created, so that an
// inconsistent config fails the job with a reason naming the key instead of
// crash-looping pods. Only what the operator must know is checked here; the
// trainer validates the rest itself.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contract/trainer_config.h"
#include "core/status.h"

namespace hypertrain::api {

// The trainer's default for trainer.max_steps (contract/trainer_config.h).
using contract::kDefaultMaxSteps;

struct TrainerConfigSummary {
  int64_t max_steps = kDefaultMaxSteps;    // trainer.max_steps (> 0)
  std::string sharding_strategy;           // model.sharding_strategy, default hybrid_shard
  int64_t shard_degree = 0;                // resolved shard group size
  int64_t requested_shard_degree = 0;      // model.shard_degree as written (0: the strategy's default)
  // model.grad_accumulation_steps (or gradient_accumulation_steps), default 1:
  // micro-batches per step at the desired size (elastic sizes, contract/elastic.h).
  int64_t grad_accumulation_steps = 1;
  std::optional<std::string> checkpoint_dir;  // exp_manager.checkpoint_dir
};

// Parses `yaml` and checks it for a job of `nodes` pods with `nproc_per_node`
// ranks each. Rules: the document is a mapping with `trainer` and `model`
// mappings; trainer.max_steps, when present, is a positive integer (default
// kDefaultMaxSteps); trainer.num_nodes and
// trainer.devices, when present, equal nodes and nproc_per_node;
// model.sharding_strategy and model.shard_degree follow the contract's strategies
// and shard-degree rule (contract/sharding.h), the ones the trainer applies;
// model.train_batch_size and model.grad_accumulation_steps are positive. The keys
// are read by the trainer's own reader (contract/trainer_config.h). Errors have field
// "spec.trainerConfig.inline" and a message starting with the YAML key.
StatusOr<TrainerConfigSummary> ValidateTrainerConfig(std::string_view yaml, int nodes,
                                                     int nproc_per_node);

}  // namespace hypertrain::api
