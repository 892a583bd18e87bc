#pragma once
// The keys of the trainer's YAML config that both sides need, read by one
// reader: the trainer (runtime/config) reads them with it from the resolved
// document, the operator (operator/api: the job-shape check and the dry-run
// estimate) from the inline config as written. One parse, one set of
// messages, so a value one side accepts the other accepts too (issue 37: the
// operator's own reader once refused `trainer.precision: bf16-mixed`).
//
// Besides the standard library this uses yaml-cpp: the config is YAML, and
// reading it through the same parser is the point. Keys outside this set are
// each side's own (runtime/config reads every other trainer key).
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "contract/estimate.h"
#include "contract/precision.h"
#include "contract/sharding.h"

namespace hypertrain::contract {

// The trainer's default for trainer.max_steps.
inline constexpr int64_t kDefaultMaxSteps = 100;

struct SharedTrainerConfig {
  int64_t max_steps = kDefaultMaxSteps;  // trainer.max_steps
  int64_t num_nodes = 1;                 // trainer.num_nodes
  int64_t devices = 1;                   // trainer.devices (ranks per node)
  bool has_num_nodes = false, has_devices = false;  // given in the file
  Precision precision = Precision::kBF16;  // model.precision, then trainer.precision (wins)
  // model.shape ("" = the implicit tiny) and the explicit fields over it;
  // a config that spells out its architecture without model.shape (a recipe)
  // is untied unless it says otherwise (Hugging Face's LlamaConfig default).
  std::string shape;
  ModelShape model;
  int64_t max_context_width = 0;          // model.max_context_width (the sequence length)
  int64_t train_batch_size = 1;           // model.train_batch_size, or micro_batch_size (wins)
  int64_t grad_accumulation_steps = 1;    // model.grad_accumulation_steps, or gradient_... (wins)
  Checkpointing activation_checkpointing = Checkpointing::kNone;  // none|selective|full or a YAML 1.1 bool
  ShardingStrategy sharding_strategy = kDefaultShardingStrategy;  // model.sharding_strategy
  int64_t shard_degree = 0;               // model.shard_degree as written (0: the strategy's default)
};

// The node at a dotted path of `root` ("model.peft.rank": each part a key of
// a mapping), or an undefined node where a part is missing or its parent is
// not a mapping. Both sides look keys up with it.
YAML::Node ConfigAt(const YAML::Node& root, const std::string& path);

// Every dotted key ReadSharedTrainerConfig reads (the trainer counts them as
// known keys).
const std::vector<std::string>& SharedTrainerConfigKeys();

// Reads the shared keys of `root` (a YAML mapping; absent or null keys keep
// their defaults). On a bad value returns nullopt and sets *error to a
// message that starts with the key, e.g. "model.shard_degree: 'x' is not an
// integer" or "trainer.precision: 'fp8' is not one of bf16, fp16, fp32, tf32".
// Ranges (>= 1 and the like) and the shard-degree rule against a world size
// are checked by each side with the job's shape (contract/sharding.h).
std::optional<SharedTrainerConfig> ReadSharedTrainerConfig(const YAML::Node& root, std::string* error);

}  // namespace hypertrain::contract
