#include "runtime/kernels/cuda/lm_head_loss.h"

#include <algorithm>
#include <string>

#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cuda_status.h"

namespace hypertrain::kernels::cuda {
namespace {

template <typename T>
cudaError_t Xent(void* logits, long ld, float* losses, const int32_t* targets, int rows,
                 int vocab, int32_t ignore, const float* dscale, cudaStream_t s) {
  return SoftmaxCrossEntropy<T>(static_cast<T*>(logits), ld, losses, targets, rows, vocab, ignore,
                                dscale, s);
}

}  // namespace

Status LmHeadLoss(Gemm& gemm, const LmHeadLossArgs& a, cudaStream_t stream) {
  if (a.n <= 0 || a.cols <= 0 || a.vocab <= 0 || a.chunk_rows <= 0) {
    return InvalidArgument("lm head loss: n, cols, vocab, chunk_rows must be positive");
  }
  const bool backward = a.dscale != nullptr;
  if (backward && a.dh == nullptr) {
    return InvalidArgument("lm head loss: dscale given without dh");
  }
  if (a.fp8 != nullptr && (a.dtype != DType::kBF16 || a.fp8->gemm == nullptr)) {
    return InvalidArgument("lm head loss: FP8 logits need bf16 and an FP8 GEMM");
  }
  const size_t es = DTypeSize(a.dtype);
  for (int r0 = 0; r0 < a.n; r0 += a.chunk_rows) {
    const int rows = std::min(a.chunk_rows, a.n - r0);
    const char* h = static_cast<const char*>(a.h) + static_cast<size_t>(r0) * a.cols * es;
    // logits[rows, V] = h[rows, C] . W[V, C]^T
    if (a.fp8 != nullptr) {
      Fp8GemmArgs f;
      f.m = rows, f.n = a.vocab, f.k = a.cols;
      f.a = {a.fp8->h + static_cast<size_t>(r0) * a.cols, model::Fp8Format::kE4M3,
             a.fp8->h_scale_inv, a.cols};
      f.b = {a.fp8->w, model::Fp8Format::kE4M3, a.fp8->w_scale_inv, a.cols};
      f.c = a.logits;
      f.c_type = DType::kBF16;
      f.fast_accum = false;  // the logits feed the softmax: keep fp32 promotion
      HT_RETURN_IF_ERROR(a.fp8->gemm->Matmul(f, stream));
    } else {
      GemmShape fwd{rows, a.vocab, a.cols, false, true};
      HT_RETURN_IF_ERROR(gemm.Matmul(fwd, h, a.w, a.dtype, a.logits, a.dtype, 1.0f, 0.0f, stream));
    }
    cudaError_t err = cudaSuccess;
    switch (a.dtype) {
      case DType::kF32:
        err = Xent<float>(a.logits, a.vocab, a.losses + r0, a.targets + r0, rows, a.vocab,
                          a.ignore_index, a.dscale, stream);
        break;
      case DType::kBF16:
        err = Xent<__nv_bfloat16>(a.logits, a.vocab, a.losses + r0, a.targets + r0, rows,
                                  a.vocab, a.ignore_index, a.dscale, stream);
        break;
      case DType::kF16:
        err = Xent<__half>(a.logits, a.vocab, a.losses + r0, a.targets + r0, rows, a.vocab,
                           a.ignore_index, a.dscale, stream);
        break;
    }
    HT_CUDA_RETURN_IF_ERROR(err);
    if (!backward) continue;
    // dh[rows, C] = dlogits[rows, V] . W[V, C]
    GemmShape dx{rows, a.cols, a.vocab, false, false};
    char* dh = static_cast<char*>(a.dh) + static_cast<size_t>(r0) * a.cols * es;
    HT_RETURN_IF_ERROR(gemm.Matmul(dx, a.logits, a.w, a.dtype, dh, a.dtype, 1.0f, 0.0f, stream));
    if (a.dw == nullptr) continue;  // frozen head
    // dW[V, C] += dlogits^T[V, rows] . h[rows, C]
    GemmShape dw{a.vocab, a.cols, rows, true, false};
    HT_RETURN_IF_ERROR(
        gemm.Matmul(dw, a.logits, h, a.dtype, a.dw, DType::kF32, 1.0f,
                    a.dw_overwrite && r0 == 0 ? 0.0f : 1.0f, stream));
  }
  return Status::Ok();
}

}  // namespace hypertrain::kernels::cuda
