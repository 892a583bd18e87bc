#pragma once
// Element-wise conversions of flat ranges: fp32 master weights to the
// compute copy (bf16/fp16/fp32), and back (tests, checkpoint export).
#include <cuda_runtime.h>

#include <cstddef>

namespace hypertrain::kernels::cuda {

template <typename To, typename From>
cudaError_t Cast(To* out, const From* in, size_t n, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
