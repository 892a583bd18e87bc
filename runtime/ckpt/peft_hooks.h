#pragma once
// What checkpointing and export do differently for PEFT (runtime/model/peft.h).
//
// A PEFT checkpoint holds only the adapters and their AdamW state (the
// backend's layout() is the adapter layout) plus, in the manifest's
// trainer_state, a reference to the frozen base: model.hf_model_name_or_path
// and a fingerprint of it (config.json, and each weight file's name, size
// and the CRC-32C of its first and last MiB: enough to tell another model or
// another revision apart without reading 16 GB). The base itself is never
// saved; every start (fresh or resumed) loads it from that directory, and a
// resume whose base does not match the reference is refused.
//
// At the end of training rank 0 writes the adapter as PEFT does
// (exp_manager.adapter_dir, runtime/ckpt/peft_export.h) and, when
// exp_manager.checkpoint.export_hf_dir is set, the merged model
// W + (alpha/rank) B A as a Hugging Face Llama directory (with a sharded
// base every rank takes part in gathering it; rank 0 writes).
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/config/config.h"
#include "runtime/model/backend.h"

namespace hypertrain::ckpt {

// Loads model.hf_model_name_or_path into the backend's frozen base: every
// unit, whole, or with a sharded base only the part this rank keeps
// (Backend::BaseNeeded). Nothing to do without a path (a random base:
// benchmarks).
Status LoadFrozenBase(const config::TrainConfig& c, model::Backend& backend);

// {"peft_type", "rank", "alpha", "dropout", "targets", "base", "base_fingerprint"}.
StatusOr<nlohmann::json> BaseReference(const config::TrainConfig& c);
// FailedPrecondition naming both bases when `saved` (from a checkpoint at
// `where`) and `now` differ in base or adapter shape.
Status CheckBaseReference(const nlohmann::json& saved, const nlohmann::json& now,
                          const std::string& where);

// The trained adapter (from the backend's master weights) as a PEFT directory.
Status ExportAdapterFromBackend(const config::TrainConfig& c, model::Backend& backend,
                                const std::string& dir);
// Base + adapter merged, as a Hugging Face Llama directory, written when
// `write`. A sharded base (Backend::ShardsBase) is gathered unit by unit
// first, a collective: every rank of the shard group calls this (only one
// with `write`), and the writer holds the whole base in host memory (fp32)
// while it merges. Unsharded, ranks without `write` return at once.
Status ExportMergedFromBackend(const config::TrainConfig& c, model::Backend& backend,
                               const std::string& dir, StDType dtype, bool write = true);

}  // namespace hypertrain::ckpt
