#pragma once
// CUDA / cuBLAS error codes as Status, with the failing expression named.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace hypertrain::kernels::cuda {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                  cudaGetErrorString(err) + ")");
}

inline Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(st)));
}

}  // namespace hypertrain::kernels::cuda

#define HT_CUDA_RETURN_IF_ERROR(expr) \
  HT_RETURN_IF_ERROR(::hypertrain::kernels::cuda::CudaStatus((expr), #expr))
#define HT_CUBLAS_RETURN_IF_ERROR(expr) \
  HT_RETURN_IF_ERROR(::hypertrain::kernels::cuda::CublasStatus((expr), #expr))
