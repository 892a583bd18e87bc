#include "contract/precision.h"

namespace hypertrain::contract {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kFP16: return "fp16";
    case Precision::kFP32: return "fp32";
    case Precision::kTF32: return "tf32";
  }
  return "?";
}

const char* CheckpointingName(Checkpointing c) {
  switch (c) {
    case Checkpointing::kNone: return "none";
    case Checkpointing::kSelective: return "selective";
    case Checkpointing::kFull: return "full";
  }
  return "?";
}

std::optional<Precision> ParsePrecision(std::string_view s) {
  if (s == "bf16" || s == "bf16-mixed") return Precision::kBF16;
  if (s == "fp16" || s == "16-mixed") return Precision::kFP16;
  if (s == "fp32" || s == "32") return Precision::kFP32;
  if (s == "tf32") return Precision::kTF32;
  return std::nullopt;
}

std::optional<Checkpointing> ParseCheckpointing(std::string_view s) {
  if (s == "none" || s == "false" || s == "False" || s == "FALSE" || s == "0") return Checkpointing::kNone;
  if (s == "selective") return Checkpointing::kSelective;
  if (s == "full" || s == "true" || s == "True" || s == "TRUE" || s == "1") return Checkpointing::kFull;
  return std::nullopt;
}

}  // namespace hypertrain::contract
