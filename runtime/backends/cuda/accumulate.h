#pragma once
// y[i] += x[i] over flat fp32 ranges: folds a reduce-scattered gradient slot
// into the persistent gradient shard (the unit pool, runtime/model/backend.h).
#include <cuda_runtime.h>

#include <cstddef>

namespace hypertrain::cuda {

cudaError_t AddInto(float* y, const float* x, size_t n, cudaStream_t stream);

}  // namespace hypertrain::cuda
