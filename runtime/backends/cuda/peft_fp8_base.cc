// CudaBackend in PEFT mode with model.peft.fp8_base: the frozen block
// projections held as e4m3 codes. For each of a block's four GEMM weights
// (q|k|v, o, gate|up, down: back to back in the base layout)
//
//   s   = e4m3 max / 2^margin / amax(W)      W rounded to bf16 first, as the
//   Wq  = fp8_e4m3(W * s), s_inv = 1 / s     bf16 base would hold it
//
// once, when the unit is stored; Fp8Projections reads (Wq, s_inv) in every
// forward and input-gradient GEMM (FrozenWeight). The codes sit at the base
// layout's offsets, one byte per element; base_[u] keeps the two norms in
// bf16 ([C] input, then [C] post), as for QLoRA. Reading the base back gives
// Wq * s_inv: the weights the forward uses. QLoRA keeps its NF4 store: each
// block, once dequantised to bf16 (MaterializeBlock), is cast to the codes
// (CastQloraBlockToFp8); reading it back gives the NF4 values.
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <vector>

#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/kernels/cuda/cast.h"
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/nf4_fp8.h"
#include "runtime/model/nf4.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::Fp8Gemm;
using model::ParamLayout;

namespace {

// The block tensors each FP8 GEMM weight spans (contiguous: fused_qkv_,
// fused_gu_), by Fp8Gemm.
struct GemmSpan {
  Fp8Gemm gemm;
  int first, last;
};
constexpr GemmSpan kSpans[] = {{Fp8Gemm::kQkv, model::kQProj, model::kVProj},
                               {Fp8Gemm::kO, model::kOProj, model::kOProj},
                               {Fp8Gemm::kGateUp, model::kGateProj, model::kUpProj},
                               {Fp8Gemm::kDown, model::kDownProj, model::kDownProj}};

model::Range SpanRange(const model::UnitLayout& ul, const GemmSpan& s) {
  return {ul.tensors[s.first].offset, ul.tensors[s.last].offset + ul.tensors[s.last].numel};
}

constexpr int kSlotFloats = 64;  // 256 bytes: cuBLASLt wants aligned scale pointers

}  // namespace

float* CudaBackend::Fp8BaseSlot(int layer, Fp8Gemm g, int k) const {
  const int i = layer * model::kFp8GemmsPerBlock + static_cast<int>(g);
  return fp8_base_slots_ + (static_cast<int64_t>(i) * 3 + k) * kSlotFloats;
}

Status CudaBackend::AllocFp8Base() {
  const int L = static_cast<int>(base_layout_.config().num_hidden_layers);
  void* p = nullptr;
  const size_t bytes = size_t(L) * model::kFp8GemmsPerBlock * 3 * kSlotFloats * sizeof(float);
  HT_RETURN_IF_ERROR(Alloc(bytes, &p));
  HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, bytes, stream_));
  fp8_base_slots_ = static_cast<float*>(p);
  state_bytes_ += static_cast<int64_t>(bytes);
  fp8_codes_.assign(base_layout_.num_units(), nullptr);
  if (!qlora_) return Status::Ok();
  // QLoRA: one block's codes, rewritten by every MaterializeBlock.
  const int64_t P = base_layout_.unit(ParamLayout::BlockUnit(0)).padded_numel;
  HT_RETURN_IF_ERROR(Alloc(P, &p));
  qlora_fp8_block_ = static_cast<uint8_t*>(p);
  state_bytes_ += P;
  fp8_qlora_scaled_.assign(base_layout_.num_units(), false);
  for (int layer = 0; layer < L; ++layer) {
    const model::UnitLayout& ul = base_layout_.unit(ParamLayout::BlockUnit(layer));
    for (const GemmSpan& s : kSpans) {
      fp8_->SetFrozenWeight(layer, s.gemm, {qlora_fp8_block_ + SpanRange(ul, s).begin,
                                            Fp8BaseSlot(layer, s.gemm, 2)});
    }
  }
  return Status::Ok();
}

// The weights' scales from the dequantised values' own amax: NF4 values
// change only when a block is stored again, so once per store.
Status CudaBackend::CastQloraBlockToFp8(int u) {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int layer = u - ParamLayout::BlockUnit(0);
  const __nv_bfloat16* bf16 = static_cast<const __nv_bfloat16*>(qlora_block_);
  for (const GemmSpan& s : kSpans) {
    const model::Range r = SpanRange(ul, s);
    float* scale = Fp8BaseSlot(layer, s.gemm, 1);
    if (!fp8_qlora_scaled_[u]) {
      float* amax = Fp8BaseSlot(layer, s.gemm, 0);
      HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax, 0, sizeof(float), stream_));
      HT_CUDA_RETURN_IF_ERROR(kc::Fp8Amax(bf16 + r.begin, r.size(), amax, stream_));
      HT_CUDA_RETURN_IF_ERROR(kc::Fp8ScalesFromAmax(amax, scale, Fp8BaseSlot(layer, s.gemm, 2), 1, 1,
                                                    model::Fp8Format::kE4M3,
                                                    static_cast<int>(options_.fp8.margin), stream_));
    }
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Cast(qlora_fp8_block_ + r.begin, bf16 + r.begin, r.size(), scale,
                                        nullptr, model::Fp8Format::kE4M3, stream_));
  }
  fp8_qlora_scaled_[u] = true;
  profile_.Mark(Op::kFp8Cast, stream_);
  return Status::Ok();
}

// The codes CastQloraBlockToFp8 writes, with the scales it computed, from the
// NF4 store in one pass per projection (the spans are their projections back
// to back, so covering every projection covers every span).
Status CudaBackend::Nf4BlockToFp8(int u) {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int layer = u - ParamLayout::BlockUnit(0);
  for (const GemmSpan& s : kSpans) {
    for (int t = s.first; t <= s.last; ++t) {
      if (t < s.last && ul.tensors[t].offset + ul.tensors[t].numel != ul.tensors[t + 1].offset) {
        return Internal(fmt::format("QLoRA block unit {}: tensor {} does not end where {} begins",
                                    u, t, t + 1));
      }
      HT_CUDA_RETURN_IF_ERROR(kc::Nf4ToFp8E4m3(qlora_fp8_block_ + ul.tensors[t].offset, nf4_[u][t],
                                               model::kNf4Codebook,
                                               Fp8BaseSlot(layer, s.gemm, 1), stream_));
    }
  }
  profile_.Mark(Op::kFp8Cast, stream_);
  return Status::Ok();
}

// `scratch`: device, >= 6 bytes per element of the unit (fp32 then bf16).
Status CudaBackend::StoreFp8Block(int u, const float* host, void* scratch) {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int64_t P = ul.padded_numel, C = base_layout_.config().hidden_size;
  const int layer = u - ParamLayout::BlockUnit(0);
  float* f32 = static_cast<float*>(scratch);
  __nv_bfloat16* bf16 = reinterpret_cast<__nv_bfloat16*>(f32 + P);
  if (fp8_codes_[u] == nullptr) {  // sizes depend only on the shapes: allocated once
    void* p = nullptr;
    HT_RETURN_IF_ERROR(Alloc(P, &p));
    fp8_codes_[u] = static_cast<uint8_t*>(p);
    HT_RETURN_IF_ERROR(Alloc(2 * C * sizeof(__nv_bfloat16), &base_[u]));  // the two norms
    state_bytes_ += P + 2 * C * 2;
    base_bytes_ += P + 2 * C * 2;
    for (const GemmSpan& s : kSpans) {
      fp8_->SetFrozenWeight(layer, s.gemm,
                            {fp8_codes_[u] + SpanRange(ul, s).begin, Fp8BaseSlot(layer, s.gemm, 2)});
    }
  }
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(f32, host, P * sizeof(float), cudaMemcpyHostToDevice, stream_));
  HT_CUDA_RETURN_IF_ERROR((kc::Cast<__nv_bfloat16, float>(bf16, f32, P, stream_)));
  for (const GemmSpan& s : kSpans) {
    const model::Range r = SpanRange(ul, s);
    float* amax = Fp8BaseSlot(layer, s.gemm, 0);
    float* scale = Fp8BaseSlot(layer, s.gemm, 1);
    HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax, 0, sizeof(float), stream_));  // a running max
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Amax(bf16 + r.begin, r.size(), amax, stream_));
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8ScalesFromAmax(amax, scale, Fp8BaseSlot(layer, s.gemm, 2), 1, 1,
                                                  model::Fp8Format::kE4M3,
                                                  static_cast<int>(options_.fp8.margin), stream_));
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Cast(fp8_codes_[u] + r.begin, bf16 + r.begin, r.size(), scale,
                                        nullptr, model::Fp8Format::kE4M3, stream_));
  }
  const int norms[2] = {model::kInputNorm, model::kPostNorm};
  for (int i = 0; i < 2; ++i) {
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<__nv_bfloat16*>(base_[u]) + i * C,
                                            bf16 + ul.tensors[norms[i]].offset, C * 2,
                                            cudaMemcpyDeviceToDevice, stream_));
  }
  // Before the caller reuses `scratch` or `host`.
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

// Unit u as the forward sees it, in bf16 at `bf16` (padded_numel elements;
// the gaps zero).
Status CudaBackend::DequantizeFp8Block(int u, void* out) {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int64_t C = base_layout_.config().hidden_size;
  const int layer = u - ParamLayout::BlockUnit(0);
  __nv_bfloat16* bf16 = static_cast<__nv_bfloat16*>(out);
  HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(bf16, 0, ul.padded_numel * 2, stream_));
  for (const GemmSpan& s : kSpans) {
    const model::Range r = SpanRange(ul, s);
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Dequantize(bf16 + r.begin, fp8_codes_[u] + r.begin, r.size(),
                                              Fp8BaseSlot(layer, s.gemm, 2), model::Fp8Format::kE4M3,
                                              stream_));
  }
  const int norms[2] = {model::kInputNorm, model::kPostNorm};
  for (int i = 0; i < 2; ++i) {
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(bf16 + ul.tensors[norms[i]].offset,
                                            static_cast<const __nv_bfloat16*>(base_[u]) + i * C,
                                            C * 2, cudaMemcpyDeviceToDevice, stream_));
  }
  return Status::Ok();
}

Status CudaBackend::WriteFp8Block(int u, model::Range r, const float* host) {
  const int64_t P = base_layout_.unit(u).padded_numel;
  if (r.begin != 0 || r.end != P) {
    return InvalidArgument(fmt::format(
        "model.peft.fp8_base: block unit {} is written whole (its projections are scaled per "
        "weight), got [{}, {})", u, r.begin, r.end));
  }
  void* scratch = nullptr;
  HT_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch, P * 6));
  const Status st = StoreFp8Block(u, host, scratch);
  cudaFree(scratch);
  return st;
}

Status CudaBackend::ReadFp8Block(int u, model::Range r, float* host) {
  const int64_t P = base_layout_.unit(u).padded_numel;
  void* tmp = nullptr;
  HT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tmp, P * 2));
  struct Free {
    void* p;
    ~Free() { cudaFree(p); }
  } free_tmp{tmp};
  HT_RETURN_IF_ERROR(DequantizeFp8Block(u, tmp));
  std::vector<__nv_bfloat16> v(static_cast<size_t>(r.size()));
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(v.data(), static_cast<__nv_bfloat16*>(tmp) + r.begin,
                                          v.size() * 2, cudaMemcpyDeviceToHost, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (int64_t i = 0; i < r.size(); ++i) host[i] = __bfloat162float(v[i]);
  return Status::Ok();
}

}  // namespace hypertrain::cuda
