#include "operator/api/instance_types.h"

#include <algorithm>

namespace hypertrain::api {

const std::vector<InstanceType>& KnownInstanceTypes() {
  // Sources: AWS instance-type pages (GPUs, EFA network interfaces); GPUDirect
  // RDMA over EFA exists on the p4d/p5 families only.
  static const std::vector<InstanceType> kTable = [] {
    std::vector<InstanceType> t = {
        {"ml.g5.12xlarge", "A10G 24GB", 4, 1, false},
        {"ml.g5.16xlarge", "A10G 24GB", 1, 1, false},
        {"ml.g5.24xlarge", "A10G 24GB", 4, 1, false},
        {"ml.g5.2xlarge", "A10G 24GB", 1, 0, false},
        {"ml.g5.48xlarge", "A10G 24GB", 8, 1, false},
        {"ml.g5.4xlarge", "A10G 24GB", 1, 0, false},
        {"ml.g5.8xlarge", "A10G 24GB", 1, 1, false},
        {"ml.g5.xlarge", "A10G 24GB", 1, 0, false},
        {"ml.p4d.24xlarge", "A100 40GB", 8, 4, true},
        {"ml.p4de.24xlarge", "A100 80GB", 8, 4, true},
        {"ml.p5.48xlarge", "H100 80GB", 8, 32, true},
        {"ml.p5e.48xlarge", "H200 141GB", 8, 32, true},
        {"ml.p5en.48xlarge", "H200 141GB", 8, 16, true},
    };
    std::sort(t.begin(), t.end(),
              [](const InstanceType& a, const InstanceType& b) { return a.name < b.name; });
    return t;
  }();
  return kTable;
}

std::optional<InstanceType> LookupInstanceType(std::string_view name) {
  for (const InstanceType& t : KnownInstanceTypes()) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

}  // namespace hypertrain::api
