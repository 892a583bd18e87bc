// Accelerator and network facts per SageMaker HyperPod instance type. The
// operator defaults gpusPerNode/efaPerNode and the EFA/NCCL environment from
// this table. Names carry HyperPod's "ml." prefix.
#ifndef HYPERTRAIN_OPERATOR_API_INSTANCE_TYPES_H_
#define HYPERTRAIN_OPERATOR_API_INSTANCE_TYPES_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::api {

struct InstanceType {
  std::string name;         // e.g. "ml.p5.48xlarge"
  std::string gpu_model;    // e.g. "H100 80GB"
  int gpus = 0;             // nvidia.com/gpu per node
  int efa_devices = 0;      // vpc.amazonaws.com/efa per node
  bool gpudirect_rdma = false;  // GPUDirect RDMA over EFA (FI_EFA_USE_DEVICE_RDMA=1)
};

// The known instance types, ordered by name.
const std::vector<InstanceType>& KnownInstanceTypes();

// Looks `name` up (exact, with the "ml." prefix); nullopt when unknown.
std::optional<InstanceType> LookupInstanceType(std::string_view name);

}  // namespace hypertrain::api

#endif  // HYPERTRAIN_OPERATOR_API_INSTANCE_TYPES_H_
