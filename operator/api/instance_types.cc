#include "operator/api/instance_types.h"

#include <algorithm>

namespace hypertrain::api {

const std::vector<InstanceType>& KnownInstanceTypes() {
  // Every HyperPod GPU instance type. GPUs and EFA devices per node are the
  // figures AWS's own HyperPod CLI requests for each ml. type
  // (aws/sagemaker-hyperpod-cli, src/sagemaker/hyperpod/training/constants.py,
  // INSTANCE_RESOURCES), which agree with the EC2 accelerated-computing pages
  // (maximum EFA interfaces): p5/p5e 32, p5en 16, p6-b300 16, p6-b200 8, p4d/p4de
  // 4, g6e.48xlarge and g7e.48xlarge 4, the 24xlarge sizes 2, the other g sizes
  // from 8xlarge up 1, the smaller g sizes none. One exception: that table lists
  // 0 EFA for ml.p6e-gb200.36xlarge, whose EC2 page gives 3200 Gbps EFAv4 on 8
  // network cards of 400 Gbps (odd card indexes), so 8 here; a cluster whose EFA
  // device plugin advertises fewer needs spec.efaPerNode. GPUDirect RDMA over EFA
  // (FI_EFA_USE_DEVICE_RDMA=1) exists on the p families (p4d and later: RDMA read
  // and write on Nitro v4/v5), not on the g families.
  static const std::vector<InstanceType> kTable = [] {
    const char* a10g = "A10G 24GB";
    const char* l4 = "L4 24GB";
    const char* l40s = "L40S 48GB";
    const char* rtx6000 = "RTX PRO 6000 Blackwell 96GB";
    std::vector<InstanceType> t = {
        {"ml.g5.xlarge", a10g, 1, 0, false},
        {"ml.g5.2xlarge", a10g, 1, 0, false},
        {"ml.g5.4xlarge", a10g, 1, 0, false},
        {"ml.g5.8xlarge", a10g, 1, 1, false},
        {"ml.g5.12xlarge", a10g, 4, 1, false},
        {"ml.g5.16xlarge", a10g, 1, 1, false},
        {"ml.g5.24xlarge", a10g, 4, 1, false},
        {"ml.g5.48xlarge", a10g, 8, 1, false},
        {"ml.g6.xlarge", l4, 1, 0, false},
        {"ml.g6.2xlarge", l4, 1, 0, false},
        {"ml.g6.4xlarge", l4, 1, 0, false},
        {"ml.g6.8xlarge", l4, 1, 1, false},
        {"ml.g6.12xlarge", l4, 4, 1, false},
        {"ml.g6.16xlarge", l4, 1, 1, false},
        {"ml.g6.24xlarge", l4, 4, 1, false},
        {"ml.g6.48xlarge", l4, 8, 1, false},
        {"ml.gr6.4xlarge", l4, 1, 0, false},
        {"ml.gr6.8xlarge", l4, 1, 1, false},
        {"ml.g6e.xlarge", l40s, 1, 0, false},
        {"ml.g6e.2xlarge", l40s, 1, 0, false},
        {"ml.g6e.4xlarge", l40s, 1, 0, false},
        {"ml.g6e.8xlarge", l40s, 1, 1, false},
        {"ml.g6e.12xlarge", l40s, 4, 1, false},
        {"ml.g6e.16xlarge", l40s, 1, 1, false},
        {"ml.g6e.24xlarge", l40s, 4, 2, false},
        {"ml.g6e.48xlarge", l40s, 8, 4, false},
        {"ml.g7e.2xlarge", rtx6000, 1, 0, false},
        {"ml.g7e.4xlarge", rtx6000, 1, 0, false},
        {"ml.g7e.8xlarge", rtx6000, 1, 1, false},
        {"ml.g7e.12xlarge", rtx6000, 2, 1, false},
        {"ml.g7e.24xlarge", rtx6000, 4, 2, false},
        {"ml.g7e.48xlarge", rtx6000, 8, 4, false},
        {"ml.p4d.24xlarge", "A100 40GB", 8, 4, true},
        {"ml.p4de.24xlarge", "A100 80GB", 8, 4, true},
        {"ml.p5.4xlarge", "H100 80GB", 1, 1, true},
        {"ml.p5.48xlarge", "H100 80GB", 8, 32, true},
        {"ml.p5e.48xlarge", "H200 141GB", 8, 32, true},
        {"ml.p5en.48xlarge", "H200 141GB", 8, 16, true},
        {"ml.p6-b200.48xlarge", "B200 179GB", 8, 8, true},
        {"ml.p6-b300.48xlarge", "B300 268GB", 8, 16, true},
        {"ml.p6e-gb200.36xlarge", "GB200 185GB", 4, 8, true},
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
