#pragma once
// What a resume compares between a checkpoint and the run that resumes it
// (issue 40): both are recorded in every checkpoint's trainer_state.
//
//   TrajectoryKeys  the config keys that change the training trajectory, by
//                   their config names (model, optimizer, schedule horizon,
//                   batch, precision, FP8, PEFT, seed); not max_steps as such,
//                   checkpointing or logging keys. ConfigHash hashes it.
//   DataIdentity    the training data: model.data.train_dir and its
//                   manifest.json (crc32c, tokens), or synthetic.
//   ResumeWarnings  one line per difference: the keys that changed (old ->
//                   new), and other data naming both.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/config.h"

namespace hypertrain::ckpt {

nlohmann::json TrajectoryKeys(const config::TrainConfig& c);
nlohmann::json DataIdentity(const config::TrainConfig& c);

// `saved`: the checkpoint's trainer_state (its "trajectory" and "data", absent
// in checkpoints written before they existed); `saved_hash` / `hash`: config
// hashes, compared when the checkpoint has no per-key record.
std::vector<std::string> ResumeWarnings(const std::string& path, const nlohmann::json& saved,
                                        const std::string& saved_hash, const nlohmann::json& trajectory,
                                        const std::string& hash, const nlohmann::json& data);

}  // namespace hypertrain::ckpt
