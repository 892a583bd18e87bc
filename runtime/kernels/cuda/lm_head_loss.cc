#include "runtime/kernels/cuda/lm_head_loss.h"

#include <algorithm>
#include <string>

#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cuda_status.h"
#include "runtime/kernels/cuda/fp8_cast.h"

namespace hypertrain::kernels::cuda {
namespace {

template <typename T>
cudaError_t Xent(void* logits, long ld, float* losses, const int32_t* targets, int rows,
                 int vocab, int32_t ignore, const float* dscale, cudaStream_t s) {
  return SoftmaxCrossEntropy<T>(static_cast<T*>(logits), ld, losses, targets, rows, vocab, ignore,
                                dscale, s);
}

// One chunk's softmax with FP8 dlogits, then the FP8 dgrad and wgrad.
Status Fp8Backward(const LmHeadLossArgs& a, const LmHeadLossArgs::Fp8Grads& g, int r0, int rows,
                   cudaStream_t stream) {
  auto* logits = static_cast<__nv_bfloat16*>(a.logits);
  HT_CUDA_RETURN_IF_ERROR(SoftmaxCrossEntropyFp8Grad(
      logits, a.vocab, a.losses + r0, a.targets + r0, rows, a.vocab, a.ignore_index, a.dscale,
      g.g_scale, a.dlogits_amax, g.g_format, stream));
  const auto* codes = static_cast<const uint8_t*>(a.logits);
  const long ld = 2L * a.vocab;  // codes sit at the start of each bf16 logits row
  // dh[rows, C] = dlogits[rows, V] . (W^T[C, V])^T
  Fp8GemmArgs dx;
  dx.m = rows, dx.n = a.cols, dx.k = a.vocab;
  dx.a = {codes, g.g_format, g.g_scale_inv, ld};
  dx.b = {g.w_t, model::Fp8Format::kE4M3, g.w_scale_inv, a.vocab};
  dx.c = static_cast<char*>(a.dh) + size_t(r0) * a.cols * sizeof(__nv_bfloat16);
  dx.c_type = DType::kBF16;
  HT_RETURN_IF_ERROR(a.fp8->gemm->Matmul(dx, stream));
  if (a.dw == nullptr) return Status::Ok();  // frozen head
  HT_CUDA_RETURN_IF_ERROR(Fp8Transpose(g.dlogits_t, codes, rows, a.vocab, stream, ld));
  // dW[V, C] (+)= dlogits^T[V, rows] . (h^T[C, rows])^T
  Fp8GemmArgs dw;
  dw.m = a.vocab, dw.n = a.cols, dw.k = rows;
  dw.a = {g.dlogits_t, g.g_format, g.g_scale_inv, rows};
  dw.b = {g.h_t + r0, model::Fp8Format::kE4M3, g.h_scale_inv, a.n};
  dw.c = a.dw;
  dw.c_type = DType::kF32;
  dw.beta = a.dw_overwrite && r0 == 0 ? 0.0f : 1.0f;
  return a.fp8->gemm->Matmul(dw, stream);
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
  const LmHeadLossArgs::Fp8Grads* g8 = backward ? a.fp8_grad : nullptr;
  if (g8 != nullptr) {
    if (a.fp8 == nullptr || a.n % 16 != 0 || a.chunk_rows % 16 != 0 ||
        (a.dw != nullptr && g8->dlogits_t == nullptr) || a.dlogits_amax == nullptr) {
      return InvalidArgument(
          "lm head loss: the FP8 backward needs FP8 logits, n and chunk_rows multiples of 16, "
          "dlogits scratch and an amax slot");
    }
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
    if (g8 != nullptr) {
      HT_RETURN_IF_ERROR(Fp8Backward(a, *g8, r0, rows, stream));
      continue;
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
    if (a.dlogits_amax != nullptr && a.dtype == DType::kBF16) {
      HT_CUDA_RETURN_IF_ERROR(Fp8Amax(static_cast<const __nv_bfloat16*>(a.logits),
                                      size_t(rows) * a.vocab, a.dlogits_amax, stream));
    }
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
