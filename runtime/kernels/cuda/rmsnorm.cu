#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/rmsnorm.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
// Row groups of the dw reduction: partial sums per (group, column).
constexpr int kDwGroups = 64;
// The fused backward: blocks (each writes one dw partial row), by packs per
// lane; about one wave on a 132-SM H100/H200. Fixed counts keep the dw sum
// order independent of the device.
constexpr int kFusedBlocksSmall = 256;  // <= 4 packs per lane: 2 blocks/SM (<= 128 registers)
constexpr int kFusedBlocksLarge = 128;  // 5..8 packs per lane: 1 block/SM
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

// The forward for cols = P packs per lane: the row stays in registers (the
// vector kernel re-reads res_out) and all 2P loads are issued before the
// first use, which is what keeps this bandwidth-bound kernel fed.
template <typename T, int P>
__global__ void RmsNormForwardRowKernel(T* __restrict__ y, float* __restrict__ rstd, T* res_out,
                                        const T* a, const T* b, const T* __restrict__ w, int rows,
                                        int cols, float eps) {
  constexpr int V = Pack<T>::kSize;
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = static_cast<size_t>(row) * cols;
  Pack<T> r[P];
#pragma unroll
  for (int k = 0; k < P; ++k) r[k] = LoadSum(a, b, base + (k * 32 + lane) * V);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < P; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) ss += ToF(r[k].v[j]) * ToF(r[k].v[j]);
    // res_out may alias a or b: this lane read these elements above.
    if (res_out != nullptr) StorePack(res_out + base + (k * 32 + lane) * V, r[k]);
  }
  ss = WarpSum(ss);
  const float rs = rsqrtf(ss / cols + eps);
  if (lane == 0) rstd[row] = rs;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int c = (k * 32 + lane) * V;
    const Pack<T> pw = LoadPack(w + c);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = FromF<T>(ToF(r[k].v[j]) * rs * ToF(pw.v[j]));
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

// dw[c] += sum over groups of partial[g][c]. Block (32, kFinishLanes): each
// row lane sums groups y, y + kFinishLanes, ... and the lanes are added in
// order: fixed order, and the group loop is spread over the block (a
// thread-per-column loop is a chain of hundreds of dependent loads).
constexpr int kFinishLanes = 16;
__global__ void RmsNormDwFinishKernel(float* __restrict__ dw, const float* __restrict__ partial,
                                      int groups, int cols) {
  __shared__ float tile[kFinishLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < cols) {
    for (int g = threadIdx.y; g < groups; g += kFinishLanes) s += partial[static_cast<size_t>(g) * cols + c];
  }
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kFinishLanes; ++i) sum += tile[i][threadIdx.x];
    dw[c] += sum;
  }
}

cudaError_t LaunchDwFinish(float* dw, const float* partial, int groups, int cols, cudaStream_t stream) {
  RmsNormDwFinishKernel<<<CeilDiv(cols, 32), dim3(32, kFinishLanes), 0, stream>>>(dw, partial, groups, cols);
  return cudaGetLastError();
}

// dx and dw in one pass over dy and r (the two-kernel path reads both twice):
// each warp takes rows gwarp, gwarp + nwarps, ..., its lanes own fixed columns
// (P packs each) and add their dw terms into the warp's own row of shared
// memory (registers hold the row's dy, r and dres, all loaded before its
// reduction); the block adds its 8 warps in order into partial[blockIdx.x].
// Fixed grid, fixed order: deterministic.
template <typename T, int P>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, P <= 4 ? 2 : 1)
    RmsNormBackwardFusedKernel(T* dx, const T* dres, const T* dy, const T* __restrict__ r,
                               const T* __restrict__ w, const float* __restrict__ rstd,
                               float* __restrict__ partial, int rows, int cols) {
  constexpr int V = Pack<T>::kSize;
  constexpr int kLaneCols = P * 32;  // stride between a lane's V sums: no bank conflicts
  // [kWarpsPerBlock][cols], column (k*32 + lane)*V + j at j*kLaneCols + k*32 + lane.
  extern __shared__ float warp_dw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nwarps = gridDim.x * kWarpsPerBlock;
  float* acc = warp_dw + warp * cols;
#pragma unroll
  for (int k = 0; k < P; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j * kLaneCols + k * 32 + lane] = 0.0f;
  }
  for (int row = blockIdx.x * kWarpsPerBlock + warp; row < rows; row += nwarps) {
    const size_t base = static_cast<size_t>(row) * cols;
    Pack<T> g[P], x[P], d[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int c = (k * 32 + lane) * V;
      g[k] = LoadPack(dy + base + c);
      x[k] = LoadPack(r + base + c);
      if (dres != nullptr) d[k] = LoadPack(dres + base + c);
    }
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const Pack<T> pw = LoadPack(w + (k * 32 + lane) * V);
#pragma unroll
      for (int j = 0; j < V; ++j) dot += ToF(g[k].v[j]) * ToF(pw.v[j]) * ToF(x[k].v[j]);
    }
    dot = WarpSum(dot);
    const float rs = rstd[row];
    const float kk = dot * rs * rs * rs / cols;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int c = (k * 32 + lane) * V;
      const Pack<T> pw = LoadPack(w + c);
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float gj = ToF(g[k].v[j]), xj = ToF(x[k].v[j]);
        float v = rs * ToF(pw.v[j]) * gj - kk * xj;
        if (dres != nullptr) v += ToF(d[k].v[j]);
        o.v[j] = FromF<T>(v);
        acc[j * kLaneCols + k * 32 + lane] += gj * xj * rs;
      }
      // dres and dx (and dy) may alias: this lane read these elements above.
      StorePack(dx + base + c, o);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const int s = (c % V) * kLaneCols + c / V;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarpsPerBlock; ++i) sum += warp_dw[i * cols + s];
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
  return LaunchDwFinish(dw, scratch, blocks, cols, stream);
}

// Calls f(std::integral_constant<int, P>) for the pack counts per lane that
// have a one-row-in-registers kernel; returns false for any other count.
template <typename F>
bool WithPacksPerLane(int packs, F&& f) {
  switch (packs) {
    case 1: f(std::integral_constant<int, 1>{}); return true;
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 3: f(std::integral_constant<int, 3>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 6: f(std::integral_constant<int, 6>{}); return true;
    case 8: f(std::integral_constant<int, 8>{}); return true;
    default: return false;
  }
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
  constexpr int V = Pack<T>::kSize;
  const dim3 grid(CeilDiv(rows, kWarpsPerBlock)), block(kWarpsPerBlock * 32);
  const bool vec = Vectorizable<T>(cols, {y, res_out, a, b, w});
  if (vec && cols % (32 * V) == 0 &&
      WithPacksPerLane(cols / (32 * V), [&](auto p) {
        RmsNormForwardRowKernel<T, decltype(p)::value>
            <<<grid, block, 0, stream>>>(y, rstd, res_out, a, b, w, rows, cols, eps);
      })) {
    return cudaGetLastError();
  }
  if (vec) {
    RmsNormForwardVecKernel<T><<<grid, block, 0, stream>>>(y, rstd, res_out, a, b, w, rows, cols, eps);
  } else {
    RmsNormForwardKernel<T><<<grid, block, 0, stream>>>(y, rstd, res_out, a, b, w, rows, cols, eps);
  }
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
  const bool vec = Vectorizable<T>(cols, {dx, dres, dy, r, w});
  cudaError_t fused = cudaSuccess;
  if (vec && cols % (32 * V) == 0 &&
      WithPacksPerLane(cols / (32 * V), [&](auto p) {
        fused = LaunchFusedBackward<T, decltype(p)::value>(dx, dres, dw, scratch, dy, r, w, rstd,
                                                           rows, cols, stream);
      })) {
    return fused;
  }
  // dw first: dx may overwrite dy's storage in callers that reuse buffers.
  RmsNormDwPartialKernel<T><<<dim3(CeilDiv(cols, 32), kDwGroups), dim3(32, 8), 0, stream>>>(
      scratch, dy, r, rstd, rows, cols);
  const cudaError_t finish = LaunchDwFinish(dw, scratch, kDwGroups, cols, stream);
  if (finish != cudaSuccess) return finish;
  if (vec) {
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
