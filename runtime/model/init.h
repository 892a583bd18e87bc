#pragma once
// Deterministic parameter initialisation shared by every backend.
//
// The value of element i of unit u depends only on (seed, u, i): a
// counter-based hash, not a sequential RNG, so any rank can initialise any
// owned range of any unit and get the same numbers as a single process, on
// CPU or GPU (the per-element math, init_math.h, gives the same bits on both;
// the CUDA kernel is runtime/kernels/cuda/param_init.h).
// Linear and embedding weights ~ N(0, 0.02) (HF initializer_range); norm
// weights = 1; alignment gaps and padding = 0. LoRA adapters as PEFT
// initialises them: lora_A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with
// a = sqrt(5)), lora_B = 0, so a fresh adapter changes nothing.
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/model/init_math.h"
#include "runtime/model/layout.h"

namespace hypertrain::model {

// The segments of `unit` that intersect `range`, clipped to it, in order.
std::vector<InitSegment> InitSegments(const ParamLayout& layout, int unit, Range range);

// Fills dst[0 .. range.size()) with the initial values of unit elements
// [range.begin, range.end).
void InitUnitParams(const ParamLayout& layout, int unit, uint64_t seed, Range range, float* dst);

}  // namespace hypertrain::model
