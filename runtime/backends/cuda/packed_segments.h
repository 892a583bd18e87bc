#pragma once
// Packed rows (TokenBatch::positions, SFT) as the CUDA backend runs them:
// one segment per sample, each its own RoPE and causal attention call
// (segments.cc). Host-only, so CI tests it without a GPU.
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace hypertrain::cuda {

struct PackedSegment {
  int row = 0;       // first token, as an index into the flattened [batch * seq] tokens
  int len = 0;       // tokens
  int64_t lse = 0;   // offset of its lse ([heads, len] floats) in a layer's lse buffer
};

// The samples of `positions` [batch, seq] (0 at every sample's first token,
// +1 inside it) in token order, each lse 16-byte aligned (offsets multiples
// of 4 floats; all of them inside batch * seq * (heads + 4) floats). Empty
// when every row is one whole sample (the batched calls do the same).
// InvalidArgument naming the element when positions do not start at 0 or
// neither continue by 1 nor restart at 0 (the CPU backend's rule).
StatusOr<std::vector<PackedSegment>> PackedSegments(const int32_t* positions, int64_t batch,
                                                    int64_t seq, int64_t heads);

}  // namespace hypertrain::cuda
