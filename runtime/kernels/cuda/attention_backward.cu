// Launchers for the tiled attention backward kernels
// (attention_backward_kernel.cu.h).
#include "runtime/kernels/cuda/attention_backward_kernel.cu.h"

namespace hypertrain::kernels::cuda::internal {
namespace {

using bwd::DeltaKernel;
using bwd::DkDvKernel;
using bwd::DqKernel;
using bwd::kDkDvSmemBytes;
using bwd::kDqSmemBytes;
using bwd::kRowsPerBlock;
using bwd::kThreads;

template <typename Kernel>
cudaError_t AllowSmem(Kernel kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

template <typename T, int D>
cudaError_t Launch(const Dims& g, const void* q, const void* k, const void* v, const void* out,
                   const void* dout, const float* lse, float* delta, void* dq, void* dk, void* dv,
                   cudaStream_t stream) {
  static const bool dq_wide = MaxSmemPerBlock() >= kDqSmemBytes<D, 64>;
  static const cudaError_t attr = [] {
    cudaError_t a = AllowSmem(DkDvKernel<T, D>, kDkDvSmemBytes<D>);
    if (a != cudaSuccess) return a;
    return dq_wide ? AllowSmem(DqKernel<T, D, 64>, kDqSmemBytes<D, 64>)
                   : AllowSmem(DqKernel<T, D, 32>, kDqSmemBytes<D, 32>);
  }();
  if (attr != cudaSuccess) return attr;
  const T* qt = static_cast<const T*>(q);
  const T* kt = static_cast<const T*>(k);
  const T* vt = static_cast<const T*>(v);
  const T* dot = static_cast<const T*>(dout);
  const int64_t rows = int64_t(g.batch) * g.seq * g.n_heads;
  constexpr int kRowsPerDeltaBlock = kThreads / (D / 8);
  DeltaKernel<T, D><<<unsigned((rows + kRowsPerDeltaBlock - 1) / kRowsPerDeltaBlock), kThreads, 0,
                      stream>>>(g, static_cast<const T*>(out), dot, delta);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const int n_blocks = (g.seq + kRowsPerBlock - 1) / kRowsPerBlock;
  DkDvKernel<T, D><<<dim3(n_blocks, g.n_kv_heads, g.batch), kThreads, kDkDvSmemBytes<D>, stream>>>(
      g, qt, kt, vt, dot, lse, delta, static_cast<T*>(dk), static_cast<T*>(dv));
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const dim3 dq_grid(n_blocks, g.n_heads, g.batch);
  if (dq_wide) {
    DqKernel<T, D, 64><<<dq_grid, kThreads, kDqSmemBytes<D, 64>, stream>>>(
        g, qt, kt, vt, dot, lse, delta, static_cast<T*>(dq));
  } else {
    DqKernel<T, D, 32><<<dq_grid, kThreads, kDqSmemBytes<D, 32>, stream>>>(
        g, qt, kt, vt, dot, lse, delta, static_cast<T*>(dq));
  }
  return cudaGetLastError();
}

}  // namespace

int MaxSmemPerBlock() {
  static const int bytes = [] {
    int device = 0, value = 48 * 1024;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
      cudaGetLastError();  // clear; fall back to the 48 KB every device has
      return 48 * 1024;
    }
    return value;
  }();
  return bytes;
}

cudaError_t TiledAttentionBackward(const Dims& g, const void* q, const void* k, const void* v,
                                   const void* out, const void* dout, const float* lse,
                                   float* delta, void* dq, void* dk, void* dv,
                                   cudaStream_t stream) {
  if (g.head_dim == 32) {
    return g.bf16 ? Launch<__nv_bfloat16, 32>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream)
                  : Launch<__half, 32>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream);
  }
  if (g.head_dim == 64) {
    return g.bf16 ? Launch<__nv_bfloat16, 64>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream)
                  : Launch<__half, 64>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream);
  }
  if (g.head_dim == 128) {
    return g.bf16 ? Launch<__nv_bfloat16, 128>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream)
                  : Launch<__half, 128>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace hypertrain::kernels::cuda::internal
