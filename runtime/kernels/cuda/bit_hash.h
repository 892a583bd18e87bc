#pragma once
// An order-independent 64-bit fingerprint of a device buffer's bits: equal
// buffers give equal hashes, and any change of any bit changes it with
// probability ~1 - 2^-64. The GEMM autotuner uses it to keep only algorithms
// whose output is bitwise identical to the heuristic's choice.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace hypertrain::kernels::cuda {

// Hashes `bytes` bytes at `data` (4-byte aligned; a trailing partial word is
// zero-padded) into *out (device memory, overwritten). Enqueued on `stream`.
cudaError_t BitHash(const void* data, size_t bytes, unsigned long long* out, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
