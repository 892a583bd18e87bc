#pragma once
// LM head + cross-entropy without full logits: the head GEMM runs on chunks
// of `chunk_rows` token rows; each chunk's logits ([chunk_rows, vocab], the
// compute dtype, in `logits` scratch) are turned into dlogits in place by
// SoftmaxCrossEntropy and immediately consumed by the two backward GEMMs:
//   dh[chunk]  = dlogits . W          (written)
//   dW        += dlogits^T . h[chunk] (fp32, accumulated)
// With `fp8` the logits GEMM runs on FP8 codes (LmHeadLossArgs::Fp8Logits);
// with `fp8_grad` too the two backward GEMMs (LmHeadLossArgs::Fp8Grads).
// Chunking along tokens keeps each row's whole vocabulary in one chunk, so
// the log-sum-exp needs no second pass and the forward GEMM runs once.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "runtime/kernels/cuda/dtype.h"
#include "runtime/kernels/cuda/fp8_gemm.h"
#include "runtime/kernels/cuda/gemm.h"

namespace hypertrain::kernels::cuda {

struct LmHeadLossArgs {
  DType dtype = DType::kBF16;  // of h, w, logits, dh
  const void* h = nullptr;     // [n, cols]
  const void* w = nullptr;     // [vocab, cols]
  const int32_t* targets = nullptr;  // [n], device
  int n = 0, cols = 0, vocab = 0;
  int chunk_rows = 0;
  int32_t ignore_index = -100;
  void* logits = nullptr;      // scratch, chunk_rows * vocab elements
  float* losses = nullptr;     // [n], written
  // Gradient outputs; all null for a forward-only loss.
  void* dh = nullptr;          // [n, cols], written
  // [vocab, cols], accumulated (or written, see below); null with dh set: a
  // frozen head (PEFT), no weight-gradient GEMM.
  float* dw = nullptr;
  bool dw_overwrite = false;   // the first chunk writes dw instead of adding to it
  const float* dscale = nullptr;  // device scalar: d(total)/d(per-token loss)
  // model.fp8_lm_head: the logits GEMM multiplies these e4m3 codes of h
  // ([n, cols]) and w ([vocab, cols]) with their dequantization scales (fp32
  // accumulation, bf16 logits); the backward GEMMs still read h and w. Null:
  // the logits GEMM in dtype.
  struct Fp8Logits {
    Fp8Gemm* gemm = nullptr;
    const uint8_t* h = nullptr;
    const uint8_t* w = nullptr;
    const float* h_scale_inv = nullptr;
    const float* w_scale_inv = nullptr;
  };
  const Fp8Logits* fp8 = nullptr;
  // model.fp8_lm_head's backward (needs fp8 and a delayed dlogits scale): the
  // softmax writes dlogits as FP8 codes over the start of each logits row
  // (SoftmaxCrossEntropyFp8Grad: row stride 2 * vocab bytes) and records
  // their amax; Fp8Transpose writes dlogits^T [vocab, rows] into
  // `dlogits_t` (chunk_rows * vocab bytes); then
  //   dh = dlogits . (w_t)^T          w_t: W^T codes [cols, vocab]
  //   dW (+)= dlogits^T . (h_t)^T     h_t: h^T codes [cols, n] (ld n)
  // with cuBLASLt's precise accumulation. n and chunk_rows must be multiples
  // of 16 (FP8 operands' 16-byte rows). Null: bf16 backward GEMMs; then
  // `dlogits_amax`, if set, still records the bf16 dlogits' amax (so the
  // first pass of a run starts the history).
  struct Fp8Grads {
    const uint8_t* w_t = nullptr;
    const uint8_t* h_t = nullptr;
    const float* w_scale_inv = nullptr;  // of w_t, h_t: Fp8Logits' scales
    const float* h_scale_inv = nullptr;
    const float* g_scale = nullptr;      // dlogits' delayed scale, its inverse
    const float* g_scale_inv = nullptr;
    model::Fp8Format g_format = model::Fp8Format::kE5M2;
    uint8_t* dlogits_t = nullptr;
  };
  const Fp8Grads* fp8_grad = nullptr;
  float* dlogits_amax = nullptr;
};

Status LmHeadLoss(Gemm& gemm, const LmHeadLossArgs& a, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
