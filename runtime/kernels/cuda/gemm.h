#pragma once
// cuBLASLt matrix products in row-major terms for the model's linear layers.
//
//   C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C[M,N]
//
// `trans_a`: A is stored as [K,M]; `trans_b`: B is stored as [N,K]. Leading
// dimensions are row strides in elements (0 = packed). The model uses
//   forward   Y[T,O]  = X[T,I] . W[O,I]^T          (trans_b)
//   dX        dX[T,I] = dY[T,O] . W[O,I]           (none; beta 1 to accumulate)
//   dW        dW[O,I] += dY[T,O]^T . X[T,I]        (trans_a; fp32 C, beta 1)
// A and B share one type (fp32, bf16 or fp16); C is that type or fp32. The
// accumulator is always fp32; fp32 inputs use TF32 tensor cores only when the
// Gemm was created with allow_tf32. The algorithm is chosen once per shape and
// cached; one workspace is allocated at creation.
//
// Autotuning (Create's `autotune`, config key cuda.gemm_autotune: on by
// default; kVerbose also logs each shape's choice; gemm_tune.h): on a shape's
// first call outside a CUDA graph capture, the
// heuristic's top candidates are run into a scratch output on the real inputs
// and timed, and the fastest wins among those whose output is bitwise
// identical to the heuristic's first choice. A call whose product is all
// zero (e.g. by a LoRA B still at its zero init) proves nothing about
// rounding, so tuning waits for a call with a real product. So the tuning
// never changes a result (runs stay reproducible whatever the timings), never writes C, and
// costs a few ms once per shape. Without memory for the scratch output the
// heuristic's choice stays.
// Bounded and cached (issue 34): tuning stops once kTuneBudgetSeconds of
// wall time went into it in this process (later shapes keep the heuristic's
// choice), and with UseTuneCache each choice is kept in a file beside the
// checkpoints (runtime/kernels/tune_cache.h) keyed by device, cuBLASLt and
// CUDA versions and the product's shape, layouts, types and alignment; a
// cached choice is taken only when the heuristic offers that algorithm again
// (then it is bitwise the choice tuning made), without running anything.
// Shapes cuBLASLt has no algorithm for (e.g. rows not 16-byte aligned) fall
// back to cublasGemmEx on the same stream and workspace.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "core/status.h"
#include "runtime/kernels/tune_cache.h"
#include "runtime/kernels/cuda/dtype.h"
#include "runtime/kernels/cuda/gemm_tune.h"

namespace hypertrain::kernels::cuda {

enum class GemmAutotune { kOff, kOn, kVerbose };
const char* GemmAutotuneName(GemmAutotune mode);
// Parses on|off|verbose; InvalidArgument otherwise.
StatusOr<GemmAutotune> ParseGemmAutotune(const std::string& name);

struct GemmShape {
  int m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  long lda = 0, ldb = 0, ldc = 0;  // 0 = packed
};

class Gemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  // Creates the cuBLASLt handle and the workspace on the current device.
  static StatusOr<std::unique_ptr<Gemm>> Create(bool allow_tf32,
                                                size_t workspace_bytes = kDefaultWorkspaceBytes,
                                                GemmAutotune autotune = GemmAutotune::kOn);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues the product on `stream`. Fails (without launching) on an invalid
  // shape or type combination or when cuBLASLt finds no algorithm.
  // With `c_in` non-null the addend is read from c_in (same layout as C) and
  // the result written to c: D = alpha*op(A).op(B) + beta*C_in, e.g. a
  // residual add fused into the projection's epilogue.
  Status Matmul(const GemmShape& s, const void* a, const void* b, DType ab_type, void* c,
                DType c_type, float alpha, float beta, cudaStream_t stream,
                const void* c_in = nullptr);

  bool allow_tf32() const { return allow_tf32_; }
  size_t cached_plans() const;
  // The workspace, for another GEMM runner queued on the same stream only
  // (Fp8Gemm::CreateSharing): products on one stream never overlap.
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // What autotuning did so far (gemm_tune.h).
  using TuneStats = GemmTuneStats;
  TuneStats tune_stats() const;
  // Overrides Create's `autotune` (on or off) for shapes not planned yet.
  void set_autotune(bool on) { autotune_ = on; }

  // Wall time tuning may take in one process, over all shapes.
  static constexpr double kTuneBudgetSeconds = 10.0;
  // Keeps tuned choices in `path` (see the class comment) for this device;
  // returns what was found there ("12 entries", "none: no file yet").
  std::string UseTuneCache(const std::string& path, const std::string& device_name);

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, bool, bool, long, long, long, int, int, int, bool>;
  Gemm(cublasLtHandle_t h, void* ws, size_t ws_bytes, bool tf32, GemmAutotune autotune);
  Status Fallback(const GemmShape& s, long lda, long ldb, long ldc, const void* a, const void* b,
                  DType ab_type, void* c, DType c_type, float alpha, float beta,
                  cudaStream_t stream, const void* c_in);
  StatusOr<Plan*> GetPlan(const Key& key, const GemmShape& s, DType ab, DType c);
  // Picks plan->algo among plan->candidates (see the class comment).
  void Tune(Plan* plan, const GemmShape& s, long ldc, const void* a, const void* b, void* c,
            DType c_type, float alpha, float beta, cudaStream_t stream, const void* c_in);

  cublasLtHandle_t handle_;
  cublasHandle_t blas_ = nullptr;  // fallback path
  void* workspace_;
  size_t workspace_bytes_;
  bool allow_tf32_;
  bool autotune_;
  int verbose_ = 0;
  TuneStats stats_;
  std::unique_ptr<TuneCache> cache_;
  bool cache_warned_ = false;
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null plan: use the fallback
};

}  // namespace hypertrain::kernels::cuda
