#pragma once
// Parameter initialisation on the device (runtime/model/init.h): the same
// counter-based values as model::InitUnitParams, bit for bit (the per-element
// math, model/init_math.h, is shared), so each rank fills just the range it
// keeps, without a host copy of the unit (an 8b model is 8e9 normal samples:
// minutes on one host core, milliseconds here).
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/model/init_math.h"

namespace hypertrain::kernels::cuda {

// dst[i - begin] = the initial value of element i of unit `unit`, for i in
// [begin, begin + n); `segments` (host memory, from model::InitSegments over
// that range) say which tensor each element belongs to; the rest is zero.
// Asynchronous on `stream`.
cudaError_t InitParams(const model::InitSegment* segments, int num_segments, uint64_t seed,
                       uint64_t unit, int64_t begin, int64_t n, float* dst, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
