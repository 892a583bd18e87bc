#include "runtime/kernels/cuda/fp8_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/cuda_status.h"
#include "runtime/kernels/cuda/lt_plan.h"

namespace hypertrain::kernels::cuda {
namespace {

cudaDataType_t Fp8Type(model::Fp8Format f) {
  return f == model::Fp8Format::kE4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}


}  // namespace

struct Fp8Gemm::Plan : LtPlan {};

std::string Fp8UnsupportedReason(int device) {
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) return std::string("cannot query the GPU: ") + cudaGetErrorString(err);
  if (prop.major * 10 + prop.minor >= 89) return {};
  return fmt::format(
      "model.fp8: GPU {} '{}' (compute capability {}.{}) has no FP8 tensor cores; FP8 training "
      "needs compute capability 8.9 or newer (H100, H200, L40S, L4). Set model.fp8: false to "
      "train in bf16 on this GPU",
      device, prop.name, prop.major, prop.minor);
}

StatusOr<std::unique_ptr<Fp8Gemm>> Fp8Gemm::Create(int device, size_t workspace_bytes) {
  const std::string why = Fp8UnsupportedReason(device);
  if (!why.empty()) return FailedPrecondition(why);
  cublasLtHandle_t h = nullptr;
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&h));
  void* ws = nullptr;
  if (workspace_bytes > 0) {
    const cudaError_t err = cudaMalloc(&ws, workspace_bytes);
    if (err != cudaSuccess) {
      cublasLtDestroy(h);
      return CudaStatus(err, "cudaMalloc(fp8 gemm workspace)");
    }
  }
  return std::unique_ptr<Fp8Gemm>(new Fp8Gemm(h, ws, workspace_bytes, /*owns_ws=*/true));
}

StatusOr<std::unique_ptr<Fp8Gemm>> Fp8Gemm::CreateSharing(int device, void* workspace,
                                                          size_t workspace_bytes, bool autotune) {
  const std::string why = Fp8UnsupportedReason(device);
  if (!why.empty()) return FailedPrecondition(why);
  cublasLtHandle_t h = nullptr;
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&h));
  std::unique_ptr<Fp8Gemm> g(
      new Fp8Gemm(h, workspace, workspace == nullptr ? 0 : workspace_bytes, /*owns_ws=*/false));
  g->autotune_ = autotune;
  return g;
}

Fp8Gemm::Fp8Gemm(cublasLtHandle_t h, void* ws, size_t ws_bytes, bool owns_ws)
    : handle_(h), workspace_(ws), workspace_bytes_(ws_bytes), owns_workspace_(owns_ws) {}

Fp8Gemm::~Fp8Gemm() {
  plans_.clear();
  if (workspace_ && owns_workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

StatusOr<Fp8Gemm::Plan*> Fp8Gemm::GetPlan(const Key& key, const Fp8GemmArgs& g, long lda,
                                          long ldb, long ldc) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  // Column-major view of row-major storage: C^T[N,M] = B[N,K] . A[M,K]^T,
  // i.e. cuBLASLt's A is our B (op T) and its B is our A (op N): "TN".
  HT_RETURN_IF_ERROR(plan->CreateDesc(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N));
  const int8_t fast = g.fast_accum ? 1 : 0;
  HT_RETURN_IF_ERROR(plan->SetAttribute(CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  // Any non-null pointer selects the scaled kernels; the real ones are set per call.
  HT_RETURN_IF_ERROR(plan->SetAttribute(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.b.scale_inv, sizeof(void*)));
  HT_RETURN_IF_ERROR(plan->SetAttribute(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.a.scale_inv, sizeof(void*)));
  const cudaDataType_t ct = g.c_type == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  HT_RETURN_IF_ERROR(plan->CreateLayouts(Fp8Type(g.b.format), g.k, g.n, ldb, Fp8Type(g.a.format), g.k,
                                         g.m, lda, ct, g.n, g.m, ldc));
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  bool usable = false;
  HT_RETURN_IF_ERROR(plan->Heuristic(handle_, workspace_bytes_, static_cast<uint32_t>(std::get<11>(key)),
                                     autotune_ ? kGemmTuneCandidates : 1, &st, &usable));
  if (!usable) {
    return InvalidArgument(fmt::format(
        "fp8 gemm: cuBLASLt has no FP8 algorithm for m={} n={} k={} a={} b={} c={} (status {})",
        g.m, g.n, g.k, model::Fp8Format::kE4M3 == g.a.format ? "e4m3" : "e5m2",
        model::Fp8Format::kE4M3 == g.b.format ? "e4m3" : "e5m2", DTypeName(g.c_type),
        static_cast<int>(st)));
  }
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

Status Fp8Gemm::Matmul(const Fp8GemmArgs& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) {
    return InvalidArgument(fmt::format("fp8 gemm: m, n, k must be positive (m={} n={} k={})", g.m, g.n, g.k));
  }
  if (g.a.format == model::Fp8Format::kE5M2 && g.b.format == model::Fp8Format::kE5M2) {
    return InvalidArgument("fp8 gemm: e5m2 x e5m2 is not supported by the FP8 tensor-core kernels");
  }
  if (g.c_type != DType::kBF16 && g.c_type != DType::kF32) {
    return InvalidArgument(std::string("fp8 gemm: C must be bf16 or fp32, got ") + DTypeName(g.c_type));
  }
  if (!g.a.data || !g.b.data || !g.c || !g.a.scale_inv || !g.b.scale_inv) {
    return InvalidArgument("fp8 gemm: null operand or scale");
  }
  const long lda = g.a.ld ? g.a.ld : g.k, ldb = g.b.ld ? g.b.ld : g.k, ldc = g.ldc ? g.ldc : g.n;
  const size_t es = DTypeSize(g.c_type);
  if (lda < g.k || ldb < g.k || ldc < g.n || g.k % 16 != 0 || lda % 16 != 0 || ldb % 16 != 0 ||
      (ldc * es) % 16 != 0) {
    return InvalidArgument(fmt::format(
        "fp8 gemm: k={} lda={} ldb={} ldc={}: rows must be 16-byte aligned (k, lda, ldb multiples "
        "of 16; ldc of {})", g.k, lda, ldb, ldc, 16 / es));
  }
  if (PointerAlignment(g.a.scale_inv) < 16 || PointerAlignment(g.b.scale_inv) < 16) {
    return InvalidArgument("fp8 gemm: scale pointers must be 16-byte aligned");
  }
  const void* c_in = g.c_in ? g.c_in : g.c;
  const int align = std::min({PointerAlignment(g.a.data), PointerAlignment(g.b.data), PointerAlignment(g.c), PointerAlignment(c_in)});
  if (align < 16) return InvalidArgument("fp8 gemm: operands must be 16-byte aligned");
  const Key key{g.m, g.n, g.k, lda, ldb, ldc, static_cast<int>(g.a.format), static_cast<int>(g.b.format),
                static_cast<int>(g.c_type), g.beta != 0.0f, g.fast_accum, align};
  HT_ASSIGN_OR_RETURN(Plan * plan, GetPlan(key, g, lda, ldb, ldc));
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.b.scale_inv, sizeof(void*)));
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.a.scale_inv, sizeof(void*)));
  if (!plan->candidates.empty()) Tune(plan, g, ldc, stream);
  const cublasStatus_t st = cublasLtMatmul(handle_, plan->desc, &g.alpha, g.b.data, plan->a, g.a.data,
                                           plan->b, &g.beta, c_in, plan->c, g.c, plan->c, &plan->algo,
                                           workspace_, workspace_bytes_, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return Internal(fmt::format(
        "fp8 gemm: cublasLtMatmul status {} for m={} n={} k={} lda={} ldb={} ldc={} a={} b={} c={} "
        "beta={} fast_accum={} alignment {} (scales {} / {})",
        static_cast<int>(st), g.m, g.n, g.k, lda, ldb, ldc,
        g.a.format == model::Fp8Format::kE4M3 ? "e4m3" : "e5m2",
        g.b.format == model::Fp8Format::kE4M3 ? "e4m3" : "e5m2", DTypeName(g.c_type), g.beta,
        g.fast_accum, align, PointerAlignment(g.a.scale_inv), PointerAlignment(g.b.scale_inv)));
  }
  return Status::Ok();
}

void Fp8Gemm::Tune(Plan* plan, const Fp8GemmArgs& g, long ldc, cudaStream_t stream) {
  std::vector<cublasLtMatmulAlgo_t> candidates;
  candidates.swap(plan->candidates);  // tuned once (unless deferred)
  const void* c_in = g.c_in ? g.c_in : g.c;
  const float no_addend = 0.0f;
  const GemmTuneResult r = TuneGemm(
      candidates, size_t(ldc) * size_t(g.m) * DTypeSize(g.c_type), stream,
      [&](const cublasLtMatmulAlgo_t& algo, bool with_addend, void* out) {
        return cublasLtMatmul(handle_, plan->desc, &g.alpha, g.b.data, plan->a, g.a.data, plan->b,
                              with_addend ? &g.beta : &no_addend, c_in, plan->c, out, plan->c,
                              &algo, workspace_, workspace_bytes_, stream);
      });
  stats_.Add(r);
  if (r.outcome == GemmTuneResult::Outcome::kDeferred) plan->candidates.swap(candidates);
  if (r.outcome == GemmTuneResult::Outcome::kTuned) plan->algo = candidates[r.best];
}

}  // namespace hypertrain::kernels::cuda
