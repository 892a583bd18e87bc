#pragma once
// The CUDA parts of the `hypertrain` assembly (assemble.h). A build with the
// CUDA toolkit compiles cuda_parts.cc: the CUDA backend, NCCL process groups,
// pinned host memory for checkpoint snapshots and `hypertrain bench`. A
// CPU-only build (no toolkit, or --config=cpu; see README "Building")
// compiles cuda_parts_none.cc instead, whose functions report the CUDA
// backend as not built in and say how to get a CUDA build.
#include <functional>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "runtime/ckpt/host_allocator.h"
#include "runtime/config/config.h"
#include "runtime/launch/env.h"
#include "runtime/model/backend.h"
#include "runtime/parallel/parallel_runtime.h"
#include "runtime/train/parts.h"

namespace hypertrain::cmd {

// True when this binary has the CUDA backend.
bool CudaBuiltIn();

struct CudaParts {
  train::BackendBundle backend;
  ckpt::HostAllocator* snapshot_allocator = nullptr;  // pinned host memory
};

// The CUDA backend on device LOCAL_RANK (else 0), with trainer.cuda_graphs.
// Unavailable without a usable device (trainer.backend: auto then takes the
// CPU); InvalidArgument "not built in" in a CPU-only build.
StatusOr<CudaParts> CreateCudaBackend(const config::TrainConfig& c, const model::BackendOptions& o,
                                      const launch::EnvLookup& env);

// NCCL process groups on device LOCAL_RANK for the CUDA backend; empty in a
// CPU-only build.
parallel::DeviceGroupsFactory CudaProcessGroups();

// `hypertrain bench` (CUDA throughput benchmark): declares its flags on
// `bench`; the returned function runs it (a CPU-only build takes any
// arguments and says the benchmark is not built in).
std::function<int()> AddBenchFlags(CLI::App& bench);

}  // namespace hypertrain::cmd
