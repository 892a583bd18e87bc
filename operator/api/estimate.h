#pragma once
// The dry run of a TrainingJob (spec.estimateOnly): the contract's estimate
// (contract/estimate.h) of the job's inline trainer config on its nodes and
// instance type, for status.estimate — what `hypertrain estimate` prints, so
// a user learns before any pod exists whether the job fits and what it costs.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "contract/estimate.h"
#include "core/status.h"
#include "operator/api/training_job.h"

namespace hypertrain::api {

// The run the inline config describes on `nodes` pods of `ranks_per_node`
// ranks (CPU ranks when !gpus), read with the trainer's key names and defaults
// (runtime/config/config.h: model.shape then explicit fields, the tiny shape
// when none; train_batch_size/micro_batch_size; ...). tests/contract compares
// it with the trainer's own reader. Errors name the key.
StatusOr<contract::RunShape> RunShapeFromTrainerConfig(std::string_view yaml, int nodes,
                                                       int ranks_per_node, bool gpus);

// status.estimate of `spec` (JSON, see docs/OPERATOR.md "Dry run"):
// parameters, FLOPs per token, memory per GPU by part, fit against the
// instance type's GPUs, the alternatives that fit, speed, and time and
// GPU-hours for trainer.max_steps; "message" sums it up in one line.
// FailedPrecondition when the config is not inline (the operator does not
// read ConfigMaps), InvalidField for a config it cannot estimate.
StatusOr<nlohmann::json> EstimateJob(const TrainingJobSpec& spec);

}  // namespace hypertrain::api
