#include "runtime/kernels/cuda/lt_plan.h"

#include "runtime/kernels/cuda/cuda_status.h"
#include "runtime/kernels/cuda/gemm_tune.h"

namespace hypertrain::kernels::cuda {
namespace {

// The matmul preference, freed on every path out of Heuristic.
class LtPreference {
 public:
  Status Create() {
    HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref_));
    return Status::Ok();
  }
  ~LtPreference() {
    if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
  }
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  cublasLtMatmulPreference_t pref_ = nullptr;
};

}  // namespace

int PointerAlignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && (v % a) != 0) a >>= 1;
  return a;
}

LtPlan::~LtPlan() {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

Status LtPlan::CreateDesc(cublasComputeType_t compute, cublasOperation_t op_a,
                          cublasOperation_t op_b) {
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  HT_RETURN_IF_ERROR(SetAttribute(CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  return SetAttribute(CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
}

Status LtPlan::SetAttribute(cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(desc, attr, value, size));
  return Status::Ok();
}

Status LtPlan::CreateLayouts(cudaDataType_t a_type, uint64_t a_rows, uint64_t a_cols, int64_t lda,
                             cudaDataType_t b_type, uint64_t b_rows, uint64_t b_cols, int64_t ldb,
                             cudaDataType_t c_type, uint64_t c_rows, uint64_t c_cols,
                             int64_t ldc) {
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&a, a_type, a_rows, a_cols, lda));
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&b, b_type, b_rows, b_cols, ldb));
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&c, c_type, c_rows, c_cols, ldc));
  return Status::Ok();
}

Status LtPlan::Heuristic(cublasLtHandle_t handle, size_t workspace_bytes, uint32_t alignment,
                         int max_results, cublasStatus_t* heuristic_status, bool* usable) {
  *usable = false;
  LtPreference pref;
  HT_RETURN_IF_ERROR(pref.Create());
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    HT_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulPreferenceSetAttribute(pref.get(), attr, &alignment, sizeof(alignment)));
  }
  cublasLtMatmulHeuristicResult_t results[kGemmTuneCandidates] = {};
  int found = 0;
  *heuristic_status = cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref.get(),
                                                     max_results, results, &found);
  if (*heuristic_status != CUBLAS_STATUS_SUCCESS || found == 0 ||
      results[0].state != CUBLAS_STATUS_SUCCESS) {
    return Status::Ok();
  }
  *usable = true;
  algo = results[0].algo;
  for (int i = 0; i < found && found > 1; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) candidates.push_back(results[i].algo);
  }
  return Status::Ok();
}

}  // namespace hypertrain::kernels::cuda
