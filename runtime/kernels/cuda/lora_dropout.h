#pragma once
// LoRA adapter dropout on the device (runtime/model/peft.h), the mask drawn
// from the counter hash of runtime/numerics/counter_rng.h, so it is bit for bit
// the CPU reference's (cpu::DropoutForward) for the same key:
//   keep(i) = DropoutKeep(key, i, threshold)
//   forward:            u[i]   = keep(i) ? x[i] * scale : 0     (writes)
//   backward (masked):  dx[i] += keep(i) ? du[i] * scale : 0
// over n contiguous elements; fp32 math. threshold 0 keeps everything.
#include <cuda_runtime.h>

#include <cstdint>

namespace hypertrain::kernels::cuda {

template <typename T>
cudaError_t LoraDropoutForward(T* u, const T* x, int64_t n, uint64_t key, uint32_t threshold,
                               float scale, cudaStream_t stream);

template <typename T>
cudaError_t LoraDropoutBackwardAccumulate(T* dx, const T* du, int64_t n, uint64_t key,
                                          uint32_t threshold, float scale, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
