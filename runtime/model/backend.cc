#include "runtime/model/backend.h"

namespace hypertrain::model {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kFP16: return "fp16";
    case Precision::kFP32: return "fp32";
    case Precision::kTF32: return "tf32";
  }
  return "?";
}

const char* CheckpointingName(ActivationCheckpointing a) {
  switch (a) {
    case ActivationCheckpointing::kNone: return "none";
    case ActivationCheckpointing::kSelective: return "selective";
    case ActivationCheckpointing::kFull: return "full";
  }
  return "?";
}

StatusOr<Precision> ParsePrecision(const std::string& s) {
  if (s == "bf16" || s == "bf16-mixed") return Precision::kBF16;
  if (s == "fp16" || s == "16-mixed") return Precision::kFP16;
  if (s == "fp32" || s == "32") return Precision::kFP32;
  if (s == "tf32") return Precision::kTF32;
  return InvalidArgument("trainer.precision: '" + s + "' is not one of bf16, fp16, fp32, tf32");
}

StatusOr<ActivationCheckpointing> ParseCheckpointing(const std::string& s) {
  // HyperPod recipes write YAML 1.1 booleans (True/False): true = every block.
  if (s == "none" || s == "false" || s == "False" || s == "FALSE" || s == "0") {
    return ActivationCheckpointing::kNone;
  }
  if (s == "selective") return ActivationCheckpointing::kSelective;
  if (s == "full" || s == "true" || s == "True" || s == "TRUE" || s == "1") {
    return ActivationCheckpointing::kFull;
  }
  return InvalidArgument("model.activation_checkpointing: '" + s +
                         "' is not one of none, selective, full");
}

int DTypeSize(DType d) { return d == DType::kF32 ? 4 : 2; }

StatusOr<double> Backend::TotalGradSumSquares() {
  double total = 0;
  for (int u = 0; u < layout().num_units(); ++u) {
    HT_ASSIGN_OR_RETURN(double s, GradSumSquares(u));
    total += s;
  }
  return total;
}

}  // namespace hypertrain::model
