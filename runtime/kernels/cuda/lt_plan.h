#pragma once
// One cuBLASLt matmul set-up, shared by the bf16/fp32 GEMM (gemm.h) and the
// FP8 GEMM (fp8_gemm.h): the operation descriptor, the layouts of cuBLASLt's
// A, B and C (= D), the algorithm in use and the candidates autotuning may
// still try. The descriptors are freed in the destructor.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace hypertrain::kernels::cuda {

// Largest power of two (<= 256) dividing the address: cuBLASLt's heuristic
// may pick kernels that assume the alignment it is told.
int PointerAlignment(const void* p);

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;  // heuristic order; cleared once tuned

  LtPlan() = default;
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  // The descriptor (fp32 scale type) with cuBLASLt's TRANSA and TRANSB.
  Status CreateDesc(cublasComputeType_t compute, cublasOperation_t op_a, cublasOperation_t op_b);
  // One more descriptor attribute (set in the order called).
  Status SetAttribute(cublasLtMatmulDescAttributes_t attr, const void* value, size_t size);
  // Layouts of cuBLASLt's column-major A, B and C (rows, cols, leading dimension).
  Status CreateLayouts(cudaDataType_t a_type, uint64_t a_rows, uint64_t a_cols, int64_t lda,
                       cudaDataType_t b_type, uint64_t b_rows, uint64_t b_cols, int64_t ldb,
                       cudaDataType_t c_type, uint64_t c_rows, uint64_t c_cols, int64_t ldc);

  // Asks the heuristic for up to `max_results` (<= kGemmTuneCandidates)
  // algorithms within the workspace, for operands aligned to `alignment`
  // bytes. A preference that cannot be set up is the returned Status; the
  // heuristic's own status is *heuristic_status, and *usable says whether it
  // succeeded with a usable first result. Then algo is that result and
  // candidates every usable one (none when it returned only one).
  Status Heuristic(cublasLtHandle_t handle, size_t workspace_bytes, uint32_t alignment,
                   int max_results, cublasStatus_t* heuristic_status, bool* usable);
};

}  // namespace hypertrain::kernels::cuda
