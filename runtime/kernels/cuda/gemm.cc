#include "runtime/kernels/cuda/gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/startup_phases.h"
#include "runtime/kernels/cuda/cuda_status.h"
#include "runtime/kernels/cuda/gemm_tune.h"
#include "runtime/kernels/cuda/lt_plan.h"

namespace hypertrain::kernels::cuda {
namespace {

cudaDataType_t ToCuda(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

// The tune cache's key of a product (everything in Gemm::Key).
template <typename Key>
std::string CacheKey(const Key& k) {
  return "gemm m=" + std::to_string(std::get<0>(k)) + " n=" + std::to_string(std::get<1>(k)) +
         " k=" + std::to_string(std::get<2>(k)) + " ta=" + std::to_string(std::get<3>(k)) +
         " tb=" + std::to_string(std::get<4>(k)) + " ld=" + std::to_string(std::get<5>(k)) + "," +
         std::to_string(std::get<6>(k)) + "," + std::to_string(std::get<7>(k)) +
         " ab=" + std::to_string(std::get<8>(k)) + " c=" + std::to_string(std::get<9>(k)) +
         " align=" + std::to_string(std::get<10>(k)) + " beta=" + std::to_string(std::get<11>(k));
}

}  // namespace

const char* GemmAutotuneName(GemmAutotune mode) {
  switch (mode) {
    case GemmAutotune::kOff:
      return "off";
    case GemmAutotune::kOn:
      return "on";
    case GemmAutotune::kVerbose:
      return "verbose";
  }
  return "unknown";
}

StatusOr<GemmAutotune> ParseGemmAutotune(const std::string& name) {
  for (GemmAutotune m : {GemmAutotune::kOff, GemmAutotune::kOn, GemmAutotune::kVerbose}) {
    if (name == GemmAutotuneName(m)) return m;
  }
  return InvalidArgument("gemm autotune must be on, off or verbose, got '" + name + "'");
}

struct Gemm::Plan : LtPlan {
  Key key;  // the tune cache's key
};

StatusOr<std::unique_ptr<Gemm>> Gemm::Create(bool allow_tf32, size_t workspace_bytes,
                                            GemmAutotune autotune) {
  cublasLtHandle_t h = nullptr;
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&h));
  void* ws = nullptr;
  if (workspace_bytes > 0) {
    const cudaError_t err = cudaMalloc(&ws, workspace_bytes);
    if (err != cudaSuccess) {
      cublasLtDestroy(h);
      return CudaStatus(err, "cudaMalloc(gemm workspace)");
    }
  }
  std::unique_ptr<Gemm> g(new Gemm(h, ws, workspace_bytes, allow_tf32, autotune));
  HT_CUBLAS_RETURN_IF_ERROR(cublasCreate(&g->blas_));
  if (ws != nullptr) HT_CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(g->blas_, ws, workspace_bytes));
  HT_CUBLAS_RETURN_IF_ERROR(cublasSetPointerMode(g->blas_, CUBLAS_POINTER_MODE_HOST));
  return g;
}

Gemm::Gemm(cublasLtHandle_t h, void* ws, size_t ws_bytes, bool tf32, GemmAutotune autotune)
    : handle_(h), workspace_(ws), workspace_bytes_(ws_bytes), allow_tf32_(tf32) {
  autotune_ = autotune != GemmAutotune::kOff;
  verbose_ = autotune == GemmAutotune::kVerbose;
}

Gemm::~Gemm() {
  plans_.clear();
  if (blas_) cublasDestroy(blas_);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

std::string Gemm::UseTuneCache(const std::string& path, const std::string& device_name) {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  const TuneCache::Context context = {
      {"device", device_name},
      {"cublaslt", std::to_string(cublasLtGetVersion())},
      {"cuda_runtime", std::to_string(runtime)},
      {"tf32", allow_tf32_ ? "1" : "0"},
      {"workspace_bytes", std::to_string(workspace_bytes_)},
  };
  std::string note;
  auto cache = std::make_unique<TuneCache>(TuneCache::Open(path, context, &note));
  std::lock_guard<std::mutex> lock(mu_);
  cache_ = std::move(cache);
  return note;
}

size_t Gemm::cached_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

Gemm::TuneStats Gemm::tune_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

StatusOr<Gemm::Plan*> Gemm::GetPlan(const Key& key, const GemmShape& s, DType ab, DType ct) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  plan->key = key;
  const bool all_f32 = ab == DType::kF32;
  const cublasComputeType_t compute =
      all_f32 && allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // Column-major view of row-major storage: C^T = op(B)^T . op(A)^T, so
  // cuBLASLt's A is our B and its B is our A.
  HT_RETURN_IF_ERROR(plan->CreateDesc(compute, s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
  const long lda = std::get<5>(key), ldb = std::get<6>(key), ldc = std::get<7>(key);
  // Our B stored row-major as [K,N] (or [N,K] when transposed); our A as
  // [M,K] (or [K,M] when transposed).
  HT_RETURN_IF_ERROR(plan->CreateLayouts(
      ToCuda(ab), s.trans_b ? s.k : s.n, s.trans_b ? s.n : s.k, ldb,
      ToCuda(ab), s.trans_a ? s.m : s.k, s.trans_a ? s.k : s.m, lda, ToCuda(ct), s.n, s.m, ldc));
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  bool usable = false;
  HT_RETURN_IF_ERROR(plan->Heuristic(handle_, workspace_bytes_, static_cast<uint32_t>(std::get<10>(key)),
                                     autotune_ ? kGemmTuneCandidates : 1, &heuristic, &usable));
  HT_RETURN_IF_ERROR(CublasStatus(heuristic, "cublasLtMatmulAlgoGetHeuristic"));
  if (!usable) {
    // Remembered as "no plan": Matmul takes the cublasGemmEx path.
    plans_.emplace(key, nullptr);
    return static_cast<Plan*>(nullptr);
  }
  // A cached choice counts only if the heuristic offers it again.
  cublasLtMatmulAlgo_t cached{};
  std::optional<std::string> hex;
  if (cache_ != nullptr && !plan->candidates.empty() && (hex = cache_->Get(CacheKey(key))) &&
      FromHex(*hex, &cached, sizeof(cached))) {
    for (const cublasLtMatmulAlgo_t& c : plan->candidates) {
      if (std::memcmp(&c, &cached, sizeof(c)) != 0) continue;
      plan->algo = c;
      plan->candidates.clear();
      ++stats_.cached;
      break;
    }
  }
  if (!plan->candidates.empty() && stats_.tune_s >= kTuneBudgetSeconds) {
    plan->candidates.clear();  // the heuristic's choice stays
    ++stats_.over_budget;
  }
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

Status Gemm::Matmul(const GemmShape& s, const void* a, const void* b, DType ab_type, void* c,
                    DType c_type, float alpha, float beta, cudaStream_t stream,
                    const void* c_in) {
  if (c_in == nullptr) c_in = c;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) {
    return InvalidArgument("gemm: m, n, k must be positive (m=" + std::to_string(s.m) +
                           " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + ")");
  }
  if (c_type != ab_type && c_type != DType::kF32) {
    return InvalidArgument(std::string("gemm: C must be fp32 or the input type, got ") +
                           DTypeName(c_type) + " for " + DTypeName(ab_type) + " inputs");
  }
  if (a == nullptr || b == nullptr || c == nullptr) return InvalidArgument("gemm: null pointer");
  const long lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
  const long ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
  const long ldc = s.ldc ? s.ldc : s.n;
  if (lda < (s.trans_a ? s.m : s.k) || ldb < (s.trans_b ? s.k : s.n) || ldc < s.n) {
    return InvalidArgument("gemm: leading dimension smaller than the row");
  }
  int align = std::min(std::min(PointerAlignment(a), PointerAlignment(b)), std::min(PointerAlignment(c), PointerAlignment(c_in)));
  // A leading dimension also limits the alignment of every row after the first.
  for (long ld : {lda, ldb}) align = std::min<int>(align, PointerAlignment(reinterpret_cast<void*>(ld * DTypeSize(ab_type))));
  align = std::min<int>(align, PointerAlignment(reinterpret_cast<void*>(ldc * DTypeSize(c_type))));
  const Key key{s.m, s.n, s.k, s.trans_a, s.trans_b, lda, ldb, ldc, static_cast<int>(ab_type),
                static_cast<int>(c_type), align, beta != 0.0f};
  HT_ASSIGN_OR_RETURN(Plan * plan, GetPlan(key, s, ab_type, c_type));
  if (plan == nullptr) {
    return Fallback(s, lda, ldb, ldc, a, b, ab_type, c, c_type, alpha, beta, stream, c_in);
  }
  if (!plan->candidates.empty()) Tune(plan, s, ldc, a, b, c, c_type, alpha, beta, stream, c_in);
  HT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, plan->desc, &alpha, b, plan->a, a, plan->b,
                                           &beta, c_in, plan->c, c, plan->c, &plan->algo, workspace_,
                                           workspace_bytes_, stream));
  return Status::Ok();
}

void Gemm::Tune(Plan* plan, const GemmShape& s, long ldc, const void* a, const void* b, void* c,
                DType c_type, float alpha, float beta, cudaStream_t stream, const void* c_in) {
  (void)c;  // C is only read (as the addend when c_in is c): candidates write a scratch
  std::vector<cublasLtMatmulAlgo_t> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    candidates.swap(plan->candidates);  // tuned once (unless deferred, below)
  }
  const float no_addend = 0.0f;
  const auto t0 = std::chrono::steady_clock::now();
  const GemmTuneResult r = TuneGemm(
      candidates, size_t(ldc) * size_t(s.m) * DTypeSize(c_type), stream,
      [&](const cublasLtMatmulAlgo_t& algo, bool with_addend, void* out) {
        return cublasLtMatmul(handle_, plan->desc, &alpha, b, plan->a, a, plan->b,
                              with_addend ? &beta : &no_addend, c_in, plan->c, out, plan->c, &algo,
                              workspace_, workspace_bytes_, stream);
      });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  startup::Accumulate("gemm_autotune", seconds);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.Add(r);
  stats_.tune_s += seconds;
  if (r.outcome == GemmTuneResult::Outcome::kDeferred) plan->candidates.swap(candidates);
  if (r.outcome != GemmTuneResult::Outcome::kTuned) return;  // failed: the heuristic's choice stays
  plan->algo = candidates[r.best];
  if (cache_ != nullptr) {
    cache_->Put(CacheKey(plan->key), ToHex(&plan->algo, sizeof(plan->algo)));
    if (Status saved = cache_->Save(); !saved.ok() && !cache_warned_) {
      cache_warned_ = true;  // a cache: the run goes on, tuning again next time
      spdlog::warn("gemm autotune: cannot keep the results: {}", saved.message());
    }
  }
  if (verbose_) {
    spdlog::info("gemm autotune m={} n={} k={} ta={} tb={} beta={}: {} candidates, {} rejected (bits differ), "
                 "heuristic {:.1f} us, chosen #{} {:.1f} us",
                 s.m, s.n, s.k, s.trans_a, s.trans_b, beta, candidates.size(), r.rejected, r.heuristic_us,
                 r.best, r.best_us);
  }
}

Status Gemm::Fallback(const GemmShape& s, long lda, long ldb, long ldc, const void* a,
                      const void* b, DType ab_type, void* c, DType c_type, float alpha, float beta,
                      cudaStream_t stream, const void* c_in) {
  if (beta != 0.0f && c_in != c) {
    // cublasGemmEx reads and writes one C: copy the addend in first.
    const size_t es = DTypeSize(c_type);
    HT_RETURN_IF_ERROR(CudaStatus(cudaMemcpy2DAsync(c, ldc * es, c_in, ldc * es, s.n * es, s.m,
                                                    cudaMemcpyDeviceToDevice, stream),
                                  "cudaMemcpy2DAsync(gemm addend)"));
  }
  HT_CUBLAS_RETURN_IF_ERROR(cublasSetStream(blas_, stream));
  const cublasComputeType_t compute = ab_type == DType::kF32 && allow_tf32_
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  // Same column-major view as the cuBLASLt path: C^T = op(B)^T . op(A)^T.
  HT_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      blas_, s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m,
      s.k, &alpha, b, ToCuda(ab_type), static_cast<int>(ldb), a, ToCuda(ab_type),
      static_cast<int>(lda), &beta, c, ToCuda(c_type), static_cast<int>(ldc), compute,
      CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

}  // namespace hypertrain::kernels::cuda
