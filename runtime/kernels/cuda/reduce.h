#pragma once
// Deterministic reductions over flat fp32 ranges (global grad norm, loss sum)
// and the loss scaler's non-finite check. Fixed grids and fixed-order trees:
// the same input gives bit-identical output on every run.
#include <cuda_runtime.h>

#include <cstddef>

namespace hypertrain::kernels::cuda {

// Partial sums SumSquaresPartials writes per call.
constexpr int kSumSquaresPartials = 1024;

// partials[0..kSumSquaresPartials) = fp64 partial sums of x[i]^2 (inf/nan
// propagate). Sum them with SumDoubles.
cudaError_t SumSquaresPartials(const float* x, size_t n, double* partials, cudaStream_t stream);

// *out = sum of x[0..n) in fp64 (one block, fixed order).
cudaError_t SumDoubles(const double* x, int n, double* out, cudaStream_t stream);

// *out = sum of x[0..n) in fp64 (one block, fixed order).
cudaError_t SumFloats(const float* x, int n, double* out, cudaStream_t stream);

// Sets *flag = 1 when any x[i] is inf or nan (never clears it; callers zero
// the flag once per step, so several ranges can share it).
cudaError_t FlagNonFinite(const float* x, size_t n, int* flag, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
