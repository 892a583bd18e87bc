#pragma once
// SwiGLU on [rows, cols]: out = silu(gate) * up, silu(g) = g * sigmoid(g).
// Backward: dgate = dout * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),
//           dup   = dout * silu(g).
// gate/up (and dgate/dup) are addressed by a shared row stride `in_stride`,
// so they can be the two halves of one fused [rows, 2*cols] projection;
// dgate/dup may alias gate/up (each element is read before it is written by
// the same thread). fp32 math.
#include <cuda_runtime.h>

namespace hypertrain::kernels::cuda {

template <typename T>
cudaError_t SwiGluForward(T* out, long out_stride, const T* gate, const T* up, long in_stride,
                          int rows, int cols, cudaStream_t stream);

template <typename T>
cudaError_t SwiGluBackward(T* dgate, T* dup, long din_stride, const T* dout, long dout_stride,
                           const T* gate, const T* up, long in_stride, int rows, int cols,
                           cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
