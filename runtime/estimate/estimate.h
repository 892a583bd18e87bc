#pragma once
// `hypertrain estimate`: the contract's estimate (contract/estimate.h) of a
// training config, as the trainer would run it, printed for people (text) or
// programs (JSON).
//
//   RunShapeFromConfig   TrainConfig + layout -> contract::RunShape
//   ConfigNotes          what the estimate cannot honour in this config
//                        (tensor parallelism, LoRA, FP8 GEMMs, ...)
//   FormatEstimate       the report (docs/TRAINER.md "Estimating a run")
//   EstimateToJson       the same numbers, one JSON object
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "contract/estimate.h"
#include "core/status.h"
#include "runtime/config/config.h"
#include "runtime/estimate/prices.h"

namespace hypertrain::estimate {

struct Layout {
  int64_t nodes = 0;          // 0 = trainer.num_nodes
  int64_t gpus_per_node = 0;  // 0 = the instance's GPUs, else trainer.devices
};

// The run `c` describes on `layout` (the instance, when given, supplies the
// GPUs per node). InvalidArgument naming the key for values the estimate
// cannot use (an unknown sharding strategy).
StatusOr<contract::RunShape> RunShapeFromConfig(const config::TrainConfig& c, const Layout& layout,
                                                const contract::InstanceType* instance);

// One line per config key whose meaning the estimate (and the trainer) does
// not model, saying what was assumed instead.
std::vector<std::string> ConfigNotes(const config::TrainConfig& c, const contract::RunShape& run,
                                     const contract::InstanceType* instance);

// The report; `title` names the config; `cost` (null: none) adds the cost
// line in dollars (prices.h).
std::string FormatEstimate(const contract::Estimate& e, const std::vector<std::string>& notes,
                           const std::string& title, const Cost* cost = nullptr);
std::string EstimateToJson(const contract::Estimate& e, const std::vector<std::string>& notes,
                           const Cost* cost = nullptr);

// Declares `hypertrain estimate`'s flags on `app` (a CLI11 subcommand); the
// returned function runs it after a parse. Exit codes: 0, kExitConfigError
// (bad flags/config). A recipe is estimated as written: without the HyperPod
// launcher's base_results_dir and, with a note, with tensor, context or expert
// parallelism read as degree 1 (what the trainer would need).
std::function<int()> AddEstimateFlags(CLI::App& app);

}  // namespace hypertrain::estimate
