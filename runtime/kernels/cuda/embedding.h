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

// HSDP's split embedding gradient (cpu::EmbeddingBackwardRange is the
// reference, matched bit for bit): tokens/dout hold `ranks` x n_per_rank rows
// (rank r's at r * n_per_rank); for every table element e = v*cols + c in the
// flat range [lo, hi) (rows may be cut at both ends), dst[e - lo] += (sum over
// ranks in order of P_r) * inv_ranks, P_r = fp32 sum of rank r's rows with
// token v in row order; bf16_reduce rounds every P_r and running sum to bf16
// (a bf16 reduce-scatter). Same sort + one block per run as
// EmbeddingBackward; scratch: EmbeddingBackwardScratchBytes(ranks *
// n_per_rank, vocab). Deterministic.
template <typename T>
cudaError_t EmbeddingBackwardRange(float* dst, int64_t lo, int64_t hi, const T* dout,
                                   const int32_t* tokens, int n_per_rank, int ranks, int cols,
                                   int vocab, bool bf16_reduce, void* scratch, size_t scratch_bytes,
                                   cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
