#pragma once
// Accelerator and network facts per SageMaker HyperPod instance type, shared
// by the operator (gpusPerNode/efaPerNode defaults, EFA/NCCL environment) and
// the runtime (`hypertrain estimate`: does a run fit, how fast is it). Names
// carry HyperPod's "ml." prefix. Standard library only.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::contract {

struct InstanceType {
  std::string name;             // e.g. "ml.p5.48xlarge"
  std::string gpu_model;        // e.g. "H100 80GB"
  int gpus = 0;                 // nvidia.com/gpu per node
  int efa_devices = 0;          // vpc.amazonaws.com/efa per node
  bool gpudirect_rdma = false;  // GPUDirect RDMA over EFA (FI_EFA_USE_DEVICE_RDMA=1)
  // Device memory per GPU as the driver reports it (nvidia-smi "Total", MiB).
  int64_t gpu_memory_mib = 0;
  // Dense bf16 tensor-core peak per GPU (TFLOP/s), the figure MFU is quoted
  // against (runtime/train/flops.h uses the same ones); 0 = not known here.
  double peak_bf16_tflops = 0;

  int64_t gpu_memory_bytes() const { return gpu_memory_mib << 20; }
};

// The known instance types, ordered by name.
const std::vector<InstanceType>& KnownInstanceTypes();

// Looks `name` up (exact, with the "ml." prefix); nullopt when unknown.
std::optional<InstanceType> LookupInstanceType(std::string_view name);

}  // namespace hypertrain::contract
