#pragma once
// FP8 matrix products through cuBLASLt with per-tensor scales (Hopper/Ada
// tensor cores), in row-major terms:
//
//   C[M,N] = alpha * (a_scale_inv * A[M,K]) . (b_scale_inv * B[N,K])^T + beta * C_in[M,N]
//
// A and B are FP8 and both K-contiguous (row stride lda / ldb >= K): the only
// operand layout cuBLASLt's FP8 kernels take on sm_89/sm_90 ("TN"), so the
// model's three products read:
//   forward  Y[T,O]  = X[T,I]   . W[O,I]^T        (X, W as stored)
//   dgrad    dX[T,I] = dY[T,O]  . Wt[I,O]^T       (Wt: W transposed, Fp8CastTranspose)
//   wgrad    dW[O,I] = dYt[O,T] . Xt[I,T]^T       (both transposed; fp32 C, beta 1)
// Formats: e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3 (not e5m2 x e5m2). C is
// bf16 or fp32 (row stride ldc); C_in (same type and layout, may alias C) is
// read when beta != 0. The scales are device pointers to fp32 (dequantization
// factors, 1 / the cast's scale), at least 16-byte aligned (an H100 with
// cuBLASLt 13 answered CUBLAS_STATUS_NOT_SUPPORTED when they were 4-byte
// aligned; the backend keeps them 256 bytes apart). Accumulation is fp32; `fast_accum` lets
// the tensor cores skip the periodic promotion of partial sums (Transformer
// Engine uses it for the forward only). K, lda, ldb and ldc must keep every
// row 16-byte aligned. One algorithm per shape, cached: with autotuning (on
// by default, the backend follows cuda.gemm_autotune) the fastest of the
// heuristic's candidates whose output bits equal its first choice's, timed on
// the shape's first call (gemm_tune.h); without it the heuristic's first.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/status.h"
#include "runtime/kernels/cuda/dtype.h"
#include "runtime/kernels/cuda/gemm_tune.h"
#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::kernels::cuda {

struct Fp8Operand {
  const uint8_t* data = nullptr;
  model::Fp8Format format = model::Fp8Format::kE4M3;
  const float* scale_inv = nullptr;  // device
  long ld = 0;                       // row stride in elements (0 = K)
};

struct Fp8GemmArgs {
  int m = 0, n = 0, k = 0;
  Fp8Operand a, b;
  void* c = nullptr;
  DType c_type = DType::kBF16;  // kBF16 or kF32
  long ldc = 0;                 // 0 = N
  const void* c_in = nullptr;   // nullptr = c
  float alpha = 1.0f, beta = 0.0f;
  bool fast_accum = false;
};

class Fp8Gemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
  // FailedPrecondition naming the device when it has no FP8 tensor cores
  // (compute capability below 8.9: A100, A10G, ...).
  static StatusOr<std::unique_ptr<Fp8Gemm>> Create(int device,
                                                   size_t workspace_bytes = kDefaultWorkspaceBytes);
  // The same with a workspace owned by someone else (not freed here), e.g.
  // the bf16 Gemm's: every product must be queued on the stream its owner
  // uses.
  static StatusOr<std::unique_ptr<Fp8Gemm>> CreateSharing(int device, void* workspace,
                                                          size_t workspace_bytes,
                                                          bool autotune = true);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Enqueues the product on `stream`; InvalidArgument (nothing launched) for
  // shapes, formats or alignments the FP8 kernels do not take.
  Status Matmul(const Fp8GemmArgs& args, cudaStream_t stream);
  size_t cached_plans() const { return plans_.size(); }
  // For shapes not planned yet.
  void set_autotune(bool on) { autotune_ = on; }
  const GemmTuneStats& tune_stats() const { return stats_; }

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, long, long, long, int, int, int, bool, bool, int>;
  Fp8Gemm(cublasLtHandle_t h, void* ws, size_t ws_bytes, bool owns_ws);
  StatusOr<Plan*> GetPlan(const Key& key, const Fp8GemmArgs& a, long lda, long ldb, long ldc);
  // Picks plan->algo among plan->candidates (gemm_tune.h).
  void Tune(Plan* plan, const Fp8GemmArgs& g, long ldc, cudaStream_t stream);

  cublasLtHandle_t handle_;
  void* workspace_;
  size_t workspace_bytes_;
  bool owns_workspace_;
  bool autotune_ = true;
  GemmTuneStats stats_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

// Empty when `device` has FP8 tensor cores, else why not (names the GPU).
std::string Fp8UnsupportedReason(int device);

}  // namespace hypertrain::kernels::cuda
