#include <algorithm>
#include <initializer_list>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/rmsnorm.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
// Row groups of the dw reduction: partial sums per (group, column).
constexpr int kDwGroups = 64;
// The fused backward: blocks (each writes one dw partial row), by packs per lane.
constexpr int kFusedBlocksSmall = 256;  // <= 4 packs per lane: 2 blocks/SM (128 registers), one wave
constexpr int kFusedBlocksLarge = 128;  // 5..8 packs per lane
constexpr int kMaxFusedPacks = 8;

// One warp per row.
template <typename T>
__global__ void RmsNormForwardKernel(T* __restrict__ y, float* __restrict__ rstd,
                                     T* res_out, const T* a, const T* b,
                                     const T* __restrict__ w, int rows,
                                     int cols, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = static_cast<size_t>(row) * cols;
  float ss = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    float r = ToF(a[base + c]);
    if (b != nullptr) {
      // Round the sum to T first: the backward pass sees the stored value.
      const T rt = FromF<T>(r + ToF(b[base + c]));
      if (res_out != nullptr) res_out[base + c] = rt;
      r = ToF(rt);
    } else if (res_out != nullptr) {
      res_out[base + c] = a[base + c];
    }
    ss += r * r;
  }
  ss = WarpSum(ss);
  const float rs = rsqrtf(ss / cols + eps);
  if (lane == 0) rstd[row] = rs;
  for (int c = lane; c < cols; c += 32) {
    // res_out may alias a or b: this lane wrote element c itself above.
    float r;
    if (res_out != nullptr) {
      r = ToF(res_out[base + c]);
    } else {
      r = ToF(a[base + c]);
      if (b != nullptr) r = ToF(FromF<T>(r + ToF(b[base + c])));
    }
    y[base + c] = FromF<T>(r * rs * ToF(w[c]));
  }
}

template <typename T>
__global__ void RmsNormBackwardDxKernel(T* dx, const T* dres, const T* dy,
                                        const T* __restrict__ r, const T* __restrict__ w,
                                        const float* __restrict__ rstd, int rows, int cols) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = static_cast<size_t>(row) * cols;
  float dot = 0.0f;
  for (int c = lane; c < cols; c += 32) dot += ToF(dy[base + c]) * ToF(w[c]) * ToF(r[base + c]);
  dot = WarpSum(dot);
  const float rs = rstd[row];
  const float k = dot * rs * rs * rs / cols;
  for (int c = lane; c < cols; c += 32) {
    float g = rs * ToF(w[c]) * ToF(dy[base + c]) - k * ToF(r[base + c]);
    // dres and dx may alias: read before write, same element, same thread.
    if (dres != nullptr) g += ToF(dres[base + c]);
    dx[base + c] = FromF<T>(g);
  }
}

// Vectorised twins of the two kernels above (16-byte accesses), used when
// cols is a multiple of the pack size and every pointer is 16-byte aligned.
template <typename T>
__device__ __forceinline__ Pack<T> LoadSum(const T* a, const T* b, size_t i) {
  Pack<T> pa = LoadPack(a + i);
  if (b != nullptr) {
    const Pack<T> pb = LoadPack(b + i);
#pragma unroll
    for (int j = 0; j < Pack<T>::kSize; ++j) pa.v[j] = FromF<T>(ToF(pa.v[j]) + ToF(pb.v[j]));
  }
  return pa;
}

template <typename T>
__global__ void RmsNormForwardVecKernel(T* __restrict__ y, float* __restrict__ rstd, T* res_out,
                                        const T* a, const T* b, const T* __restrict__ w, int rows,
                                        int cols, float eps) {
  constexpr int V = Pack<T>::kSize;
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = static_cast<size_t>(row) * cols;
  float ss = 0.0f;
  for (int c = lane * V; c < cols; c += 32 * V) {
    const Pack<T> r = LoadSum(a, b, base + c);
    if (res_out != nullptr) StorePack(res_out + base + c, r);
#pragma unroll
    for (int j = 0; j < V; ++j) ss += ToF(r.v[j]) * ToF(r.v[j]);
  }
  ss = WarpSum(ss);
  const float rs = rsqrtf(ss / cols + eps);
  if (lane == 0) rstd[row] = rs;
  for (int c = lane * V; c < cols; c += 32 * V) {
    // res_out may alias a or b: this lane wrote these elements itself above.
    const Pack<T> r = res_out != nullptr ? LoadPack(res_out + base + c) : LoadSum(a, b, base + c);
    const Pack<T> pw = LoadPack(w + c);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = FromF<T>(ToF(r.v[j]) * rs * ToF(pw.v[j]));
    StorePack(y + base + c, o);
  }
}

template <typename T>
__global__ void RmsNormBackwardDxVecKernel(T* dx, const T* dres, const T* dy,
                                           const T* __restrict__ r, const T* __restrict__ w,
                                           const float* __restrict__ rstd, int rows, int cols) {
  constexpr int V = Pack<T>::kSize;
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = static_cast<size_t>(row) * cols;
  float dot = 0.0f;
  for (int c = lane * V; c < cols; c += 32 * V) {
    const Pack<T> g = LoadPack(dy + base + c), x = LoadPack(r + base + c), pw = LoadPack(w + c);
#pragma unroll
    for (int j = 0; j < V; ++j) dot += ToF(g.v[j]) * ToF(pw.v[j]) * ToF(x.v[j]);
  }
  dot = WarpSum(dot);
  const float rs = rstd[row];
  const float k = dot * rs * rs * rs / cols;
  for (int c = lane * V; c < cols; c += 32 * V) {
    const Pack<T> g = LoadPack(dy + base + c), x = LoadPack(r + base + c), pw = LoadPack(w + c);
    Pack<T> d;
    if (dres != nullptr) d = LoadPack(dres + base + c);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = rs * ToF(pw.v[j]) * ToF(g.v[j]) - k * ToF(x.v[j]);
      if (dres != nullptr) v += ToF(d.v[j]);
      o.v[j] = FromF<T>(v);
    }
    StorePack(dx + base + c, o);
  }
}

__global__ void RmsNormDwFinishKernel(float* __restrict__ dw, const float* __restrict__ partial,
                                      int groups, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int g = 0; g < groups; ++g) s += partial[static_cast<size_t>(g) * cols + c];
  dw[c] += s;
}

// dx and dw in one pass over dy and r (the two-kernel path reads both twice):
// each warp takes rows gwarp, gwarp + nwarps, ..., its lanes own fixed columns
// (P packs each) and keep their dw sums in registers; the block adds its 8
// warps in order into partial[blockIdx.x]. Fixed grid, fixed order:
// deterministic.
template <typename T, int P>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    RmsNormBackwardFusedKernel(T* dx, const T* dres, const T* dy, const T* __restrict__ r,
                               const T* __restrict__ w, const float* __restrict__ rstd,
                               float* __restrict__ partial, int rows, int cols) {
  constexpr int V = Pack<T>::kSize;
  extern __shared__ float warp_dw[];  // [kWarpsPerBlock][cols]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nwarps = gridDim.x * kWarpsPerBlock;
  Pack<T> pw[P];
  float acc[P][V];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    pw[k] = LoadPack(w + (k * 32 + lane) * V);
#pragma unroll
    for (int j = 0; j < V; ++j) acc[k][j] = 0.0f;
  }
  for (int row = blockIdx.x * kWarpsPerBlock + warp; row < rows; row += nwarps) {
    const size_t base = static_cast<size_t>(row) * cols;
    Pack<T> g[P], x[P];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int c = (k * 32 + lane) * V;
      g[k] = LoadPack(dy + base + c);
      x[k] = LoadPack(r + base + c);
#pragma unroll
      for (int j = 0; j < V; ++j) dot += ToF(g[k].v[j]) * ToF(pw[k].v[j]) * ToF(x[k].v[j]);
    }
    dot = WarpSum(dot);
    const float rs = rstd[row];
    const float kk = dot * rs * rs * rs / cols;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int c = (k * 32 + lane) * V;
      Pack<T> d;
      if (dres != nullptr) d = LoadPack(dres + base + c);
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float gj = ToF(g[k].v[j]), xj = ToF(x[k].v[j]);
        float v = rs * ToF(pw[k].v[j]) * gj - kk * xj;
        if (dres != nullptr) v += ToF(d.v[j]);
        o.v[j] = FromF<T>(v);
        acc[k][j] += gj * xj * rs;
      }
      // dres and dx (and dy) may alias: this lane read these elements above.
      StorePack(dx + base + c, o);
    }
  }
#pragma unroll
  for (int k = 0; k < P; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) warp_dw[warp * cols + (k * 32 + lane) * V + j] = acc[k][j];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarpsPerBlock; ++i) sum += warp_dw[i * cols + c];
    partial[static_cast<size_t>(blockIdx.x) * cols + c] = sum;
  }
}

template <typename T, int P>
cudaError_t LaunchFusedBackward(T* dx, const T* dres, float* dw, float* scratch, const T* dy,
                                const T* r, const T* w, const float* rstd, int rows, int cols,
                                cudaStream_t stream) {
  const int blocks = P <= 4 ? kFusedBlocksSmall : kFusedBlocksLarge;
  const size_t smem = size_t(kWarpsPerBlock) * cols * sizeof(float);
  if (smem > 48 * 1024) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        RmsNormBackwardFusedKernel<T, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(size_t(kWarpsPerBlock) * kMaxFusedPacks * 32 * Pack<T>::kSize * sizeof(float)));
    if (attr != cudaSuccess) return attr;
  }
  RmsNormBackwardFusedKernel<T, P><<<blocks, kWarpsPerBlock * 32, smem, stream>>>(
      dx, dres, dy, r, w, rstd, scratch, rows, cols);
  RmsNormDwFinishKernel<<<CeilDiv(cols, 256), 256, 0, stream>>>(dw, scratch, blocks, cols);
  return cudaGetLastError();
}

template <typename T>
bool Vectorizable(int cols, std::initializer_list<const void*> ptrs) {
  if (cols % Pack<T>::kSize != 0) return false;
  for (const void* p : ptrs)
    if (p != nullptr && !Aligned16(p)) return false;
  return true;
}

// Block (32, 8): 32 columns x 8 row lanes; blockIdx.y = row group.
template <typename T>
__global__ void RmsNormDwPartialKernel(float* __restrict__ partial, const T* __restrict__ dy,
                                       const T* __restrict__ r, const float* __restrict__ rstd,
                                       int rows, int cols) {
  __shared__ float tile[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int rows_per_group = (rows + gridDim.y - 1) / gridDim.y;
  const int r0 = blockIdx.y * rows_per_group;
  const int r1 = min(rows, r0 + rows_per_group);
  float acc = 0.0f;
  if (c < cols) {
    for (int row = r0 + threadIdx.y; row < r1; row += 8) {
      const size_t i = static_cast<size_t>(row) * cols + c;
      acc += ToF(dy[i]) * ToF(r[i]) * rstd[row];
    }
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += tile[j][threadIdx.x];
    partial[static_cast<size_t>(blockIdx.y) * cols + c] = s;
  }
}


}  // namespace

template <typename T>
cudaError_t RmsNormForward(T* y, float* rstd, T* res_out, const T* a, const T* b, const T* w,
                           int rows, int cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  if (Vectorizable<T>(cols, {y, res_out, a, b, w})) {
    RmsNormForwardVecKernel<T><<<CeilDiv(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
        y, rstd, res_out, a, b, w, rows, cols, eps);
    return cudaGetLastError();
  }
  RmsNormForwardKernel<T><<<CeilDiv(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
      y, rstd, res_out, a, b, w, rows, cols, eps);
  return cudaGetLastError();
}

size_t RmsNormBackwardScratchFloats(int cols) {
  return static_cast<size_t>(std::max(kDwGroups, kFusedBlocksSmall)) * cols;
}

template <typename T>
cudaError_t RmsNormBackward(T* dx, const T* dres, float* dw, float* scratch, const T* dy,
                            const T* r, const T* w, const float* rstd, int rows, int cols,
                            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  constexpr int V = Pack<T>::kSize;
  if (cols % (32 * V) == 0 && Vectorizable<T>(cols, {dx, dres, dy, r, w})) {
    switch (cols / (32 * V)) {
      case 1: return LaunchFusedBackward<T, 1>(dx, dres, dw, scratch, dy, r, w, rstd, rows, cols, stream);
      case 2: return LaunchFusedBackward<T, 2>(dx, dres, dw, scratch, dy, r, w, rstd, rows, cols, stream);
      case 3: return LaunchFusedBackward<T, 3>(dx, dres, dw, scratch, dy, r, w, rstd, rows, cols, stream);
      case 4: return LaunchFusedBackward<T, 4>(dx, dres, dw, scratch, dy, r, w, rstd, rows, cols, stream);
      case 6: return LaunchFusedBackward<T, 6>(dx, dres, dw, scratch, dy, r, w, rstd, rows, cols, stream);
      case 8: return LaunchFusedBackward<T, 8>(dx, dres, dw, scratch, dy, r, w, rstd, rows, cols, stream);
      default: break;
    }
  }
  // dw first: dx may overwrite dy's storage in callers that reuse buffers.
  RmsNormDwPartialKernel<T><<<dim3(CeilDiv(cols, 32), kDwGroups), dim3(32, 8), 0, stream>>>(
      scratch, dy, r, rstd, rows, cols);
  RmsNormDwFinishKernel<<<CeilDiv(cols, 256), 256, 0, stream>>>(dw, scratch, kDwGroups, cols);
  if (Vectorizable<T>(cols, {dx, dres, dy, r, w})) {
    RmsNormBackwardDxVecKernel<T>
        <<<CeilDiv(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(dx, dres, dy, r, w,
                                                                             rstd, rows, cols);
  } else {
    RmsNormBackwardDxKernel<T><<<CeilDiv(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
        dx, dres, dy, r, w, rstd, rows, cols);
  }
  return cudaGetLastError();
}

#define HT_INSTANTIATE(T)                                                                     \
  template cudaError_t RmsNormForward<T>(T*, float*, T*, const T*, const T*, const T*, int,   \
                                         int, float, cudaStream_t);                           \
  template cudaError_t RmsNormBackward<T>(T*, const T*, float*, float*, const T*, const T*,   \
                                          const T*, const float*, int, int, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
