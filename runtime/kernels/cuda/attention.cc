// Argument checks, workspace sizing and dispatch for the CUDA attention kernels.
#include "runtime/kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

#include "runtime/kernels/cuda/attention_cudnn.h"
#include "runtime/kernels/cuda/attention_internal.h"
#include "runtime/kernels/cuda/attention_kernels.h"

namespace hypertrain::kernels::cuda {
namespace {

using internal::Impl;

Status CheckPointer(const void* ptr, const char* name) {
  if (ptr == nullptr) return InvalidArgument(std::string("attention: ") + name + " is null");
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    return InvalidArgument(std::string("attention: ") + name + " must be 16-byte aligned");
  }
  return Status::Ok();
}

internal::Dims ResolveDims(const AttentionParams& p) {
  internal::Dims g;
  g.batch = p.batch;
  g.seq = p.seq;
  g.n_heads = p.n_heads;
  g.n_kv_heads = p.n_kv_heads;
  g.head_dim = p.head_dim;
  g.group = p.n_heads / p.n_kv_heads;
  g.scale = p.scale;
  g.bf16 = p.dtype == AttentionDtype::kBf16;
  g.fp32 = p.dtype == AttentionDtype::kFp32;
  const int64_t q_width = int64_t{p.n_heads} * p.head_dim;
  const int64_t kv_width = int64_t{p.n_kv_heads} * p.head_dim;
  g.q_stride = p.q_row_stride != 0 ? p.q_row_stride : q_width;
  g.k_stride = p.k_row_stride != 0 ? p.k_row_stride : kv_width;
  g.v_stride = p.v_row_stride != 0 ? p.v_row_stride : kv_width;
  g.o_stride = p.o_row_stride != 0 ? p.o_row_stride : q_width;
  return g;
}

// Prints each distinct message once per process (implementation choices).
void LogOnce(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (seen->insert(message).second) spdlog::info("attention: {}", message);
}

std::string Describe(const AttentionParams& p) {
  return "B=" + std::to_string(p.batch) + " T=" + std::to_string(p.seq) +
         " H=" + std::to_string(p.n_heads) + " KV=" + std::to_string(p.n_kv_heads) +
         " D=" + std::to_string(p.head_dim) +
         (p.dtype == AttentionDtype::kFp16 ? " fp16" : " bf16");
}

// p with the scale filled in when a memory plan asks before knowing it (the
// scale does not change plans or workspace).
AttentionParams WithScale(AttentionParams p) {
  if (!(p.scale > 0.0f) && p.head_dim > 0) p.scale = 1.0f / std::sqrt(float(p.head_dim));
  return p;
}

cudnn_attention::BackwardMode CudnnMode(Impl impl) {
  return impl == Impl::kCudnnFast ? cudnn_attention::BackwardMode::kFast
                                  : cudnn_attention::BackwardMode::kDeterministic;
}

size_t TiledBackwardWorkspaceBytes(const AttentionParams& p) {
  if (p.batch <= 0 || p.seq <= 0 || p.n_heads <= 0) return 0;
  const size_t bytes = sizeof(float) * size_t(p.batch) * size_t(p.n_heads) * size_t(p.seq);
  return (bytes + 255) / 256 * 256;
}

Status LaunchStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string("attention: ") + what + " launch failed: " + cudaGetErrorString(err));
}

}  // namespace

Status ValidateAttentionParams(const AttentionParams& p) {
  auto bad = [](const std::string& m) { return InvalidArgument("attention: " + m); };
  if (p.batch <= 0) return bad("batch must be > 0, got " + std::to_string(p.batch));
  if (p.seq <= 0) return bad("seq must be > 0, got " + std::to_string(p.seq));
  if (p.cudnn_bwd_workspace_cap_bytes == 0) return bad("cudnn_bwd_workspace_cap_bytes must be > 0");
  if (p.n_heads <= 0 || p.n_kv_heads <= 0) {
    return bad("n_heads and n_kv_heads must be > 0, got " + std::to_string(p.n_heads) + " and " +
               std::to_string(p.n_kv_heads));
  }
  if (p.n_heads % p.n_kv_heads != 0) {
    return bad("n_heads (" + std::to_string(p.n_heads) + ") must be a multiple of n_kv_heads (" +
               std::to_string(p.n_kv_heads) + ")");
  }
  if (p.head_dim != 32 && p.head_dim != 64 && p.head_dim != 128) {
    return bad("head_dim must be 32, 64 or 128, got " + std::to_string(p.head_dim));
  }
  if (!(p.scale > 0.0f)) return bad("scale must be > 0");
  if (p.dtype != AttentionDtype::kBf16 && p.dtype != AttentionDtype::kFp16 &&
      p.dtype != AttentionDtype::kFp32) {
    return bad("dtype must be bf16, fp16 or fp32");
  }
  const int64_t q_width = int64_t{p.n_heads} * p.head_dim;
  const int64_t kv_width = int64_t{p.n_kv_heads} * p.head_dim;
  struct Stride {
    const char* name;
    int64_t value;
    int64_t min;
  };
  for (const Stride& s : {Stride{"q_row_stride", p.q_row_stride, q_width},
                          Stride{"k_row_stride", p.k_row_stride, kv_width},
                          Stride{"v_row_stride", p.v_row_stride, kv_width},
                          Stride{"o_row_stride", p.o_row_stride, q_width}}) {
    if (s.value == 0) continue;
    if (s.value < s.min || s.value % 8 != 0) {
      return bad(std::string(s.name) + " must be 0 (dense) or a multiple of 8 that is >= " +
                 std::to_string(s.min) + ", got " + std::to_string(s.value));
    }
  }
  return Status::Ok();
}

size_t AttentionBackwardWorkspaceBytes(const AttentionParams& p) {
  return internal::BackwardWorkspaceBytes(p.impl, p);
}


namespace internal {

Status Forward(Impl impl, const AttentionParams& p, const void* q, const void* k, const void* v,
               void* out, float* lse, cudaStream_t stream, int fwd_m_tiles) {
  HT_RETURN_IF_ERROR(ValidateAttentionParams(p));
  HT_RETURN_IF_ERROR(CheckPointer(q, "q"));
  HT_RETURN_IF_ERROR(CheckPointer(k, "k"));
  HT_RETURN_IF_ERROR(CheckPointer(v, "v"));
  HT_RETURN_IF_ERROR(CheckPointer(out, "out"));
  if (lse != nullptr) HT_RETURN_IF_ERROR(CheckPointer(lse, "lse"));
  const Dims g = ResolveDims(p);
  switch (Resolve(impl, p, /*backward=*/false)) {
    case Impl::kTiled:
      return LaunchStatus(TiledAttentionForward(g, q, k, v, out, lse, stream, fwd_m_tiles),
                          "forward");
    case Impl::kSimple:
      return LaunchStatus(SimpleAttentionForward(g, q, k, v, out, lse, stream), "forward");
    case Impl::kCudnn:
    case Impl::kCudnnFast:
    case Impl::kCudnnForward:
      return cudnn_attention::Forward(p, q, k, v, out, lse, stream);
    case Impl::kAuto:
      break;
  }
  return InvalidArgument("attention: unknown implementation");
}

Status Backward(Impl impl, const AttentionParams& p, const void* q, const void* k, const void* v,
                const void* out, const void* dout, const float* lse, void* dq, void* dk, void* dv,
                void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  HT_RETURN_IF_ERROR(ValidateAttentionParams(p));
  struct Named {
    const void* ptr;
    const char* name;
  };
  for (const Named& n : {Named{q, "q"}, Named{k, "k"}, Named{v, "v"}, Named{out, "out"},
                         Named{dout, "dout"}, Named{lse, "lse"}, Named{dq, "dq"}, Named{dk, "dk"},
                         Named{dv, "dv"}, Named{workspace, "workspace"}}) {
    HT_RETURN_IF_ERROR(CheckPointer(n.ptr, n.name));
  }
  const Impl chosen = Resolve(impl, p, /*backward=*/true);
  const size_t need = BackwardWorkspaceBytes(chosen, p);
  if (workspace_bytes < need) {
    return InvalidArgument("attention: backward workspace holds " + std::to_string(workspace_bytes) +
                           " bytes, needs " + std::to_string(need) + " (" + AttentionImplName(chosen) + ")");
  }
  if (chosen == Impl::kCudnn || chosen == Impl::kCudnnFast) {
    return cudnn_attention::Backward(p, CudnnMode(chosen), q, k, v, out, dout, lse, dq, dk, dv,
                                     workspace, workspace_bytes, stream);
  }
  const Dims g = ResolveDims(p);
  float* delta = static_cast<float*>(workspace);
  switch (chosen) {
    case Impl::kTiled:
      return LaunchStatus(
          TiledAttentionBackward(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream),
          "backward");
    case Impl::kSimple:
      return LaunchStatus(
          SimpleAttentionBackward(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream),
          "backward");
    case Impl::kCudnn:
    case Impl::kCudnnFast:
    case Impl::kCudnnForward:
    case Impl::kAuto:
      break;
  }
  return InvalidArgument("attention: unknown implementation");
}

Impl Resolve(Impl impl, const AttentionParams& p, bool backward) {
  if (p.dtype == AttentionDtype::kFp32) return Impl::kSimple;  // tensor-core paths are 16-bit
  if (impl == Impl::kCudnnForward) return backward ? Impl::kTiled : Impl::kCudnn;
  if (impl != Impl::kAuto) return impl;
  const bool fast = backward && !p.deterministic;
  const Status st = backward ? cudnn_attention::BackwardWorkspaceBytes(
                                   p, fast ? cudnn_attention::BackwardMode::kFast
                                           : cudnn_attention::BackwardMode::kDeterministic)
                                   .status()
                             : cudnn_attention::PrepareForward(p);
  const std::string dir = backward ? "backward " : "forward ";
  if (st.ok()) {
    LogOnce(dir + Describe(p) + ": cuDNN " + std::to_string(cudnn_attention::LoadedVersion()) +
            (!backward ? "" : fast ? " (atomic dQ, not reproducible)" : " (deterministic)"));
    return fast ? Impl::kCudnnFast : Impl::kCudnn;
  }
  LogOnce(dir + Describe(p) + ": tiled kernels (cuDNN unavailable: " + st.message() + ")");
  return Impl::kTiled;
}

size_t BackwardWorkspaceBytes(Impl impl, const AttentionParams& p_in) {
  const AttentionParams p = WithScale(p_in);
  size_t bytes = TiledBackwardWorkspaceBytes(p);
  if (!ValidateAttentionParams(p).ok()) return bytes;
  const Impl chosen = Resolve(impl, p, /*backward=*/true);
  if (chosen == Impl::kCudnn || chosen == Impl::kCudnnFast) {
    const StatusOr<size_t> need = cudnn_attention::BackwardWorkspaceBytes(p, CudnnMode(chosen));
    if (need.ok()) bytes = std::max(bytes, *need);
  }
  return bytes;
}

}  // namespace internal

Status AttentionForward(const AttentionParams& p, const void* q, const void* k, const void* v,
                        void* out, float* lse, cudaStream_t stream) {
  return internal::Forward(p.impl, p, q, k, v, out, lse, stream);
}

Status AttentionBackward(const AttentionParams& p, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse, void* dq, void* dk,
                         void* dv, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return internal::Backward(p.impl, p, q, k, v, out, dout, lse, dq, dk, dv,
                            workspace, workspace_bytes, stream);
}

}  // namespace hypertrain::kernels::cuda
