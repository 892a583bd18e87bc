#include "contract/instance_types.h"

#include <algorithm>

namespace hypertrain::contract {
namespace {

// Device memory per GPU as the driver reports it (nvidia-smi "Total", MiB):
// measured on these GPUs (the H200's in docs/PERF.md's runs).
constexpr int64_t kA10g = 23028, kL4 = 23034, kL40s = 46068, kA100_40 = 40960, kA100_80 = 81920,
                  kH100 = 81559, kH200 = 143771;
// GPUs without a driver figure here: the marketed size in decimal GB, which is
// below what the driver reports (H100 "80GB" = 81559 MiB = 85.5 GB), so a
// fit check against it errs on the safe side.
constexpr int64_t Nominal(int64_t gb) { return gb * 1000 * 1000 * 1000 / (1 << 20); }

}  // namespace

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
  //
  // Memory per GPU: see kH100 and Nominal above. Peaks: NVIDIA datasheets,
  // dense bf16 TFLOP/s (H100/H200 SXM 989.4, A100 312, L40S 362.05, L4 121,
  // A10 125: the A10G in g5 runs lower clocks than the A10 datasheet, so
  // estimates for g5 are optimistic by that ratio); 0 where this table has no
  // checked figure (the estimate then asks for --peak-tflops).
  static const std::vector<InstanceType> kTable = [] {
    const char* a10g = "A10G 24GB";
    const char* l4 = "L4 24GB";
    const char* l40s = "L40S 48GB";
    const char* rtx6000 = "RTX PRO 6000 Blackwell 96GB";
    std::vector<InstanceType> t = {
        {"ml.g5.xlarge", a10g, 1, 0, false, kA10g, 125.0},
        {"ml.g5.2xlarge", a10g, 1, 0, false, kA10g, 125.0},
        {"ml.g5.4xlarge", a10g, 1, 0, false, kA10g, 125.0},
        {"ml.g5.8xlarge", a10g, 1, 1, false, kA10g, 125.0},
        {"ml.g5.12xlarge", a10g, 4, 1, false, kA10g, 125.0},
        {"ml.g5.16xlarge", a10g, 1, 1, false, kA10g, 125.0},
        {"ml.g5.24xlarge", a10g, 4, 1, false, kA10g, 125.0},
        {"ml.g5.48xlarge", a10g, 8, 1, false, kA10g, 125.0},
        {"ml.g6.xlarge", l4, 1, 0, false, kL4, 121.0},
        {"ml.g6.2xlarge", l4, 1, 0, false, kL4, 121.0},
        {"ml.g6.4xlarge", l4, 1, 0, false, kL4, 121.0},
        {"ml.g6.8xlarge", l4, 1, 1, false, kL4, 121.0},
        {"ml.g6.12xlarge", l4, 4, 1, false, kL4, 121.0},
        {"ml.g6.16xlarge", l4, 1, 1, false, kL4, 121.0},
        {"ml.g6.24xlarge", l4, 4, 1, false, kL4, 121.0},
        {"ml.g6.48xlarge", l4, 8, 1, false, kL4, 121.0},
        {"ml.gr6.4xlarge", l4, 1, 0, false, kL4, 121.0},
        {"ml.gr6.8xlarge", l4, 1, 1, false, kL4, 121.0},
        {"ml.g6e.xlarge", l40s, 1, 0, false, kL40s, 362.05},
        {"ml.g6e.2xlarge", l40s, 1, 0, false, kL40s, 362.05},
        {"ml.g6e.4xlarge", l40s, 1, 0, false, kL40s, 362.05},
        {"ml.g6e.8xlarge", l40s, 1, 1, false, kL40s, 362.05},
        {"ml.g6e.12xlarge", l40s, 4, 1, false, kL40s, 362.05},
        {"ml.g6e.16xlarge", l40s, 1, 1, false, kL40s, 362.05},
        {"ml.g6e.24xlarge", l40s, 4, 2, false, kL40s, 362.05},
        {"ml.g6e.48xlarge", l40s, 8, 4, false, kL40s, 362.05},
        {"ml.g7e.2xlarge", rtx6000, 1, 0, false, Nominal(96), 0},
        {"ml.g7e.4xlarge", rtx6000, 1, 0, false, Nominal(96), 0},
        {"ml.g7e.8xlarge", rtx6000, 1, 1, false, Nominal(96), 0},
        {"ml.g7e.12xlarge", rtx6000, 2, 1, false, Nominal(96), 0},
        {"ml.g7e.24xlarge", rtx6000, 4, 2, false, Nominal(96), 0},
        {"ml.g7e.48xlarge", rtx6000, 8, 4, false, Nominal(96), 0},
        {"ml.p4d.24xlarge", "A100 40GB", 8, 4, true, kA100_40, 312.0},
        {"ml.p4de.24xlarge", "A100 80GB", 8, 4, true, kA100_80, 312.0},
        {"ml.p5.4xlarge", "H100 80GB", 1, 1, true, kH100, 989.4},
        {"ml.p5.48xlarge", "H100 80GB", 8, 32, true, kH100, 989.4},
        {"ml.p5e.48xlarge", "H200 141GB", 8, 32, true, kH200, 989.4},
        {"ml.p5en.48xlarge", "H200 141GB", 8, 16, true, kH200, 989.4},
        {"ml.p6-b200.48xlarge", "B200 179GB", 8, 8, true, Nominal(179), 0},
        {"ml.p6-b300.48xlarge", "B300 268GB", 8, 16, true, Nominal(268), 0},
        {"ml.p6e-gb200.36xlarge", "GB200 185GB", 4, 8, true, Nominal(185), 0},
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

}  // namespace hypertrain::contract
