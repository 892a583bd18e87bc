// Launcher for the tiled attention forward kernel (attention_forward_kernel.cu.h).
#include "runtime/kernels/cuda/attention_forward_kernel.cu.h"

namespace hypertrain::kernels::cuda::internal {
namespace {

using fwd::kBr;
using fwd::kFwdSmemBytes;
using fwd::kThreads;
using fwd::TiledForwardKernel;

template <typename T, int D>
cudaError_t Launch(const Dims& g, const void* q, const void* k, const void* v, void* out,
                   float* lse, cudaStream_t stream) {
  // Raise the dynamic shared-memory limit once per instantiation.
  static const cudaError_t attr = cudaFuncSetAttribute(
      TiledForwardKernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kFwdSmemBytes<D>);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((g.seq + kBr - 1) / kBr, g.n_heads, g.batch);
  TiledForwardKernel<T, D><<<grid, kThreads, kFwdSmemBytes<D>, stream>>>(
      g, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
      static_cast<T*>(out), lse);
  return cudaGetLastError();
}

}  // namespace

cudaError_t TiledAttentionForward(const Dims& g, const void* q, const void* k, const void* v,
                                  void* out, float* lse, cudaStream_t stream) {
  if (g.head_dim == 32) {
    return g.bf16 ? Launch<__nv_bfloat16, 32>(g, q, k, v, out, lse, stream)
                  : Launch<__half, 32>(g, q, k, v, out, lse, stream);
  }
  if (g.head_dim == 64) {
    return g.bf16 ? Launch<__nv_bfloat16, 64>(g, q, k, v, out, lse, stream)
                  : Launch<__half, 64>(g, q, k, v, out, lse, stream);
  }
  if (g.head_dim == 128) {
    return g.bf16 ? Launch<__nv_bfloat16, 128>(g, q, k, v, out, lse, stream)
                  : Launch<__half, 128>(g, q, k, v, out, lse, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace hypertrain::kernels::cuda::internal
