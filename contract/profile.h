#pragma once
// A request to trace a few training steps (the trainer's `trainer.profile`):
// the TrainingJob annotation kAnnotationProfile (pod.h) carries it from the
// user to the operator, which passes it to the next attempt's pods as
// HYPERTRAIN_PROFILE (env.h); the trainer reads it as trainer.profile.*.
//
//   "num_steps=5"                       the first 5 steps the attempt runs
//   "start_step=1200,num_steps=3"       steps 1201..1203 (or the first 3 after
//                                       1200 when the attempt resumes later)
//   "num_steps=2,dir=/fsx/traces"       files under /fsx/traces
//
// Keys: start_step (>= 0, default 0), num_steps (1..kMaxProfileSteps,
// required), dir (absolute; default <exp_dir>/traces; last, it takes the
// rest of the text, commas included). Comma-separated, each key once.
// Standard library only.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hypertrain::contract {

// A trace grows with every step it holds (a CUDA step is thousands of
// events); more than this is a mistake, not a profile.
inline constexpr int64_t kMaxProfileSteps = 100;

struct ProfileRequest {
  int64_t start_step = 0;
  int64_t num_steps = 0;
  std::string dir;  // "" = the trainer's default

  bool operator==(const ProfileRequest&) const = default;
};

// The canonical text (keys in the order above; start_step and dir only when set).
std::string EncodeProfile(const ProfileRequest& p);
// nullopt with *error set (e.g. "num_steps must be in 1..100, got 0",
// "unknown key 'steps'") for a malformed value.
std::optional<ProfileRequest> DecodeProfile(std::string_view text, std::string* error);

}  // namespace hypertrain::contract
