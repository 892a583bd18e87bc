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

#include <cstdint>

namespace hypertrain::kernels::cuda {

template <typename T>
cudaError_t SoftmaxCrossEntropy(T* logits, long ld, float* losses, const int32_t* targets,
                                int rows, int vocab, int32_t ignore_index, const float* dscale,
                                cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
