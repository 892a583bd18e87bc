#include "runtime/model/backend.h"

namespace hypertrain::model {

StatusOr<Precision> ParsePrecision(const std::string& s) {
  if (auto p = contract::ParsePrecision(s)) return *p;
  return InvalidArgument("trainer.precision: '" + s + "' is not one of bf16, fp16, fp32, tf32");
}

StatusOr<ActivationCheckpointing> ParseCheckpointing(const std::string& s) {
  if (auto c = contract::ParseCheckpointing(s)) return *c;
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
