#pragma once
// Device-independent math of the model and the training step, shared by every
// backend and the training loop (the CUDA step uploads these host results;
// the CPU reference ops build on them). No device code, no framework types.
#include <cstdint>

#include "runtime/model/config.h"

namespace hypertrain::model {

// RoPE inverse frequencies, i < head_dim/2: theta^(-2i/head_dim), then Llama-3
// frequency scaling when scaling.type == kLlama3 (wavelengths longer than
// original/low_freq_factor divided by factor, shorter than
// original/high_freq_factor kept, smooth interpolation between). In fp64.
void RopeInvFreq(double* inv_freq, int64_t head_dim, double theta, const RopeScaling& s);

// Number of targets != ignore_index (the denominator of the mean loss).
int64_t CountTargets(const int32_t* targets, int64_t N, int32_t ignore_index);

// Global-norm clipping factor: min(1, max_norm / (norm + 1e-6)); 1 when
// max_norm <= 0 (clipping off) or norm is not finite.
double ClipFactor(double global_norm, double max_norm);

}  // namespace hypertrain::model
