#pragma once
// Token embedding lookup and its deterministic backward.
//   forward:  out[n, :] = table[tokens[n], :]
//   backward: dtable[v, :] += sum over n with tokens[n] == v of dout[n, :],
//             each row's terms summed in increasing n. The positions are
//             stably radix-sorted by token (CUB), then one block per run of
//             equal tokens sums its rows in order: no float atomics, so the
//             result is bit-identical run to run.
// Tokens must lie in [0, vocab) (the data loader checks them).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace hypertrain::kernels::cuda {

template <typename T>
cudaError_t EmbeddingForward(T* out, const int32_t* tokens, const T* table, int n, int cols,
                             cudaStream_t stream);

// Bytes of device scratch EmbeddingBackward needs for n tokens (256-aligned).
size_t EmbeddingBackwardScratchBytes(int n, int vocab);

// `dtable` is fp32 (the embedding's gradient, accumulated into).
template <typename T>
cudaError_t EmbeddingBackward(float* dtable, const T* dout, const int32_t* tokens, int n,
                              int cols, int vocab, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
