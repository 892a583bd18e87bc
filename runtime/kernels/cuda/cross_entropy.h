#pragma once
// Softmax cross-entropy over one chunk of logit rows, gradient in place.
//   losses[r] = logsumexp(logits[r, :]) - logits[r, target[r]]   (fp32)
//   logits[r, :] <- (softmax(logits[r, :]) - onehot(target[r])) * (*dscale)
// Rows whose target == ignore_index get loss 0 and zero gradient. With
// dscale == nullptr only the losses are computed (logits untouched). dscale
// lives in device memory so a captured CUDA graph reads the value current at
// replay. One block per row, single pass for (max, sum) with an online
// rescale, a second pass for the gradient; fp32 math for any T.
//
// The LM head driver (lm_head_loss.h) calls this on row chunks of the head
// GEMM's output so that full [tokens, vocab] logits never exist.
#include <cuda_runtime.h>

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::kernels::cuda {

template <typename T>
cudaError_t SoftmaxCrossEntropy(T* logits, long ld, float* losses, const int32_t* targets,
                                int rows, int vocab, int32_t ignore_index, const float* dscale,
                                cudaStream_t stream);

// The same softmax and loss with the gradient as FP8 codes (the LM head's
// FP8 backward, model.fp8_lm_head): per row r, with g the bf16-rounded
// gradient above,
//   codes[r, v] = fp8(g[r, v] * (*scale))    (round to nearest even, saturating)
//   *amax = max(*amax, max |g|)
// The codes overwrite the first `vocab` bytes of the row's own logits: row r's
// codes start at byte r * ld * 2 (a byte row stride of 2 * ld). Bytes are
// those of SoftmaxCrossEntropy's bf16 gradient then Fp8Cast. The row's codes
// are staged in shared memory: vocab <= kMaxFp8GradVocab.
constexpr size_t kMaxFp8GradVocab = 200 * 1024;
cudaError_t SoftmaxCrossEntropyFp8Grad(__nv_bfloat16* logits, long ld, float* losses,
                                       const int32_t* targets, int rows, int vocab,
                                       int32_t ignore_index, const float* dscale,
                                       const float* scale, float* amax, model::Fp8Format format,
                                       cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
