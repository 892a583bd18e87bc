#pragma once
#include <cstddef>

#include "runtime/numerics/adamw_params.h"

namespace hypertrain::kernels::cpu {

// Reference AdamW: updates `param`, `m` and `v` in place from `grad`, all fp32
// flat arrays of `n` elements. Plain double-checked arithmetic; the oracle for
// the CUDA kernel.
void AdamW(float* param, const float* grad, float* m, float* v, size_t n,
           const AdamWParams& p);

}  // namespace hypertrain::kernels::cpu
