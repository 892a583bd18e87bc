// LoRA adapter forward/backward as cuBLASLt GEMMs; the math is in lora.h.
#include "runtime/kernels/cuda/lora.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "runtime/kernels/cuda/cuda_status.h"
#include "runtime/kernels/cuda/dtype.h"
#include "runtime/kernels/cuda/lora_dropout.h"

namespace hypertrain::kernels::cuda {
namespace {

Status CheckShape(const LoraShape& s) {
  if (s.n <= 0 || s.in_features <= 0 || s.out_features <= 0 || s.rank <= 0) {
    return InvalidArgument("LoRA shape must be positive (n, in, out, rank)");
  }
  if (s.out_ld != 0 && s.out_ld < s.out_features) {
    return InvalidArgument("LoRA out_ld must be 0 or >= out_features");
  }
  return Status::Ok();
}

// u = dropout(x) into the scratch, or x itself without a mask.
template <typename T>
StatusOr<const T*> AdapterInput(const LoraShape& s, T* u_scratch, const T* x,
                                const model::DropoutMask& mask, cudaStream_t stream) {
  if (!mask.active()) return x;
  if (u_scratch == nullptr) return InvalidArgument("LoRA dropout needs u_scratch");
  HT_CUDA_RETURN_IF_ERROR(LoraDropoutForward<T>(u_scratch, x,
                                                int64_t{s.n} * s.in_features, mask.key,
                                                mask.threshold, mask.scale, stream));
  return static_cast<const T*>(u_scratch);
}

}  // namespace

template <typename T>
Status LoraForward(Gemm& gemm, const LoraShape& s, T* out, T* t, T* u_scratch, const T* x,
                   const T* a, const T* b, const model::DropoutMask& mask, cudaStream_t stream) {
  HT_RETURN_IF_ERROR(CheckShape(s));
  constexpr DType kT = DTypeOf<T>::value;
  HT_ASSIGN_OR_RETURN(const T* u, AdapterInput<T>(s, u_scratch, x, mask, stream));
  // t[N,r] = s * u[N,IF] . A[r,IF]^T
  GemmShape g1{s.n, s.rank, s.in_features, false, true};
  HT_RETURN_IF_ERROR(gemm.Matmul(g1, u, a, kT, t, kT, s.scaling, 0.0f, stream));
  // out[N,OF] += t[N,r] . B[OF,r]^T
  GemmShape g2{s.n, s.out_features, s.rank, false, true};
  g2.ldc = s.out_ld;
  return gemm.Matmul(g2, t, b, kT, out, kT, 1.0f, 1.0f, stream);
}

template <typename T>
Status LoraBackward(Gemm& gemm, const LoraShape& s, T* dx, float* da, float* db, T* dt,
                    T* u_scratch, const T* dout, const T* x, const T* t, const T* a, const T* b,
                    const model::DropoutMask& mask, cudaStream_t stream) {
  HT_RETURN_IF_ERROR(CheckShape(s));
  constexpr DType kT = DTypeOf<T>::value;
  // dB[OF,r] += dout[N,OF]^T . t[N,r]
  GemmShape gb{s.out_features, s.rank, s.n, true, false};
  gb.lda = s.out_ld;
  HT_RETURN_IF_ERROR(gemm.Matmul(gb, dout, t, kT, db, DType::kF32, 1.0f, 1.0f, stream));
  // dt[N,r] = s * dout[N,OF] . B[OF,r]
  GemmShape gt{s.n, s.rank, s.out_features, false, false};
  gt.lda = s.out_ld;
  HT_RETURN_IF_ERROR(gemm.Matmul(gt, dout, b, kT, dt, kT, s.scaling, 0.0f, stream));
  // dA[r,IF] += dt[N,r]^T . u[N,IF]
  HT_ASSIGN_OR_RETURN(const T* u, AdapterInput<T>(s, u_scratch, x, mask, stream));
  GemmShape ga{s.rank, s.in_features, s.n, true, false};
  HT_RETURN_IF_ERROR(gemm.Matmul(ga, dt, u, kT, da, DType::kF32, 1.0f, 1.0f, stream));
  if (dx == nullptr) return Status::Ok();
  // du[N,IF] = dt[N,r] . A[r,IF]; straight into dx without a mask.
  GemmShape gx{s.n, s.in_features, s.rank, false, false};
  if (!mask.active()) return gemm.Matmul(gx, dt, a, kT, dx, kT, 1.0f, 1.0f, stream);
  HT_RETURN_IF_ERROR(gemm.Matmul(gx, dt, a, kT, u_scratch, kT, 1.0f, 0.0f, stream));
  HT_CUDA_RETURN_IF_ERROR(LoraDropoutBackwardAccumulate<T>(
      dx, u_scratch, int64_t{s.n} * s.in_features, mask.key, mask.threshold, mask.scale, stream));
  return Status::Ok();
}

#define HT_INSTANTIATE(T)                                                                      \
  template Status LoraForward<T>(Gemm&, const LoraShape&, T*, T*, T*, const T*, const T*,      \
                                 const T*, const model::DropoutMask&, cudaStream_t);           \
  template Status LoraBackward<T>(Gemm&, const LoraShape&, T*, float*, float*, T*, T*,         \
                                  const T*, const T*, const T*, const T*, const T*,            \
                                  const model::DropoutMask&, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)

}  // namespace hypertrain::kernels::cuda
