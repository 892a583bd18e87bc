#pragma once
// The trainer's numeric precision (trainer.precision) and activation
// checkpointing (model.activation_checkpointing) modes, with their names and
// the spellings the config accepts (HyperPod recipes write Lightning names
// such as `bf16-mixed` and YAML 1.1 booleans for checkpointing). The runtime
// parses its config with them and the estimate names them, so a value one
// side accepts the other accepts too.

#include <optional>
#include <string_view>

namespace hypertrain::contract {

enum class Precision { kBF16, kFP16, kFP32, kTF32 };
enum class Checkpointing { kNone, kSelective, kFull };

const char* PrecisionName(Precision p);          // "bf16", "fp16", "fp32", "tf32"
const char* CheckpointingName(Checkpointing c);  // "none", "selective", "full"

// bf16 | bf16-mixed, fp16 | 16-mixed, fp32 | 32, tf32; nullopt otherwise.
std::optional<Precision> ParsePrecision(std::string_view name);
// none | false | 0, selective, full | true | 1 (YAML 1.1 capitalisations too:
// True/TRUE, False/FALSE); nullopt otherwise.
std::optional<Checkpointing> ParseCheckpointing(std::string_view name);

}  // namespace hypertrain::contract
