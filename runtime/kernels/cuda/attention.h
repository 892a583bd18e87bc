#pragma once
// Causal grouped-query flash attention, forward and backward, on CUDA.
//
// Layout (row-major, "token-major", what a fused QKV GEMM's output split gives):
//   q     [batch, seq, n_heads,    head_dim]  element (b,t,h,d) at
//         q + (b*seq + t) * q_row_stride + h*head_dim + d
//   k, v  [batch, seq, n_kv_heads, head_dim]  same with k_row_stride / v_row_stride
//   out, dout [batch, seq, n_heads, head_dim] with o_row_stride
//   dq, dk, dv: same layout and row strides as q, k, v (so they can be slices
//         of one fused dQKV buffer that feeds the dQKV GEMM directly).
//   lse   [batch, n_heads, seq] fp32, dense: natural-log logsumexp of each
//         scaled score row, written by forward, read by backward.
// A row stride of 0 means dense: n_heads*head_dim for q/out, n_kv_heads*head_dim
// for k/v. With a fused QKV buffer of row width (n_heads + 2*n_kv_heads)*head_dim,
// pass q = qkv, k = qkv + n_heads*head_dim, v = k + n_kv_heads*head_dim and that
// width as all three strides. Pointers must be 16-byte aligned and row strides
// multiples of 8 elements (16-byte vector loads).
//
// Semantics: out[b,t,h,:] = sum_{s<=t} softmax_s(scale * q[b,t,h,:].k[b,s,g,:]) v[b,s,g,:]
// with g = h / (n_heads / n_kv_heads) (causal; GQA). Accumulation is fp32;
// inputs/outputs are bf16, fp16 or fp32 (all tensors of one call share it).
//
// Implementations (docs/ATTENTION.md): AttentionParams::impl = kAuto (default) runs
// cuDNN's fused attention where cuDNN plans these params on this device, else
// our tiled tensor-core kernels; cudnn, cudnn-fast, cudnn-fwd, tiled, simple
// force one. The choice is printed once per shape on stderr.
//
// Backward is deterministic (two runs on the same inputs give bitwise-identical
// dq, dk, dv) in every implementation except cudnn-fast, which `auto` picks
// only for params with deterministic = false. Ours: no
// floating-point atomics; dk/dv of a kv head are summed over its query heads in
// a fixed order inside one thread block, and dq is computed by a separate pass
// over key blocks. cuDNN's: its atomic-free "dP workspace" graph.
//
// Supported: head_dim 32, 64 or 128; seq >= 1 (any length, no multiple required);
// n_heads % n_kv_heads == 0. Calls are asynchronous on `stream` and allocate
// nothing (a cuDNN plan is built, once, on the first use of a shape that
// AttentionBackwardWorkspaceBytes did not already plan). The first call per
// (dtype, head_dim) in a process also sets the
// kernels' shared-memory limits (cudaFuncSetAttribute, one device per
// process), so run one step before capturing a CUDA graph; later calls are
// plain launches. They return InvalidArgument for bad shapes/pointers and
// Internal for a launch error.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "runtime/kernels/attention_impl.h"

namespace hypertrain::kernels::cuda {

// kFp32 (the fp32 precision mode) runs scalar fp32 kernels without tensor
// cores: correct but far slower; bf16/fp16 use the tensor-core kernels.
enum class AttentionDtype { kBf16, kFp16, kFp32 };

// Which kernels run: the one enum of cuda.attention_impl
// (runtime/kernels/attention_impl.h), shared with the config.
using kernels::AttentionImpl;
using kernels::AttentionImplName;
using kernels::ParseAttentionImpl;

// Default cap of one deterministic cuDNN backward call's workspace
// (cuda.cudnn_bwd_workspace_mb).
constexpr size_t kDefaultCudnnBackwardWorkspaceCapBytes = size_t{2048} << 20;

struct AttentionParams {
  int batch = 0;
  int seq = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 0.0f;  // usually 1/sqrt(head_dim); must be > 0
  AttentionDtype dtype = AttentionDtype::kBf16;
  // Elements between consecutive tokens; 0 = dense (see above).
  int64_t q_row_stride = 0;
  int64_t k_row_stride = 0;
  int64_t v_row_stride = 0;
  int64_t o_row_stride = 0;
  // true: the backward must be bitwise reproducible, so `auto` picks cuDNN's
  // atomic-free backward (or our tiled kernels). false lets `auto` pick
  // cuDNN's atomic-dQ backward (cudnn-fast): faster and a smaller workspace,
  // but dq differs in its last bits from run to run. The forward is the same.
  bool deterministic = true;
  // The implementation the public functions run (cuda.attention_impl).
  AttentionImpl impl = AttentionImpl::kAuto;
  // The deterministic cuDNN backward runs over batch chunks whose one-call
  // workspace fits this many bytes (cuda.cudnn_bwd_workspace_mb); must be > 0.
  size_t cudnn_bwd_workspace_cap_bytes = kDefaultCudnnBackwardWorkspaceCapBytes;
};

// Checks shapes, strides and dtype (pointers are checked by the calls).
Status ValidateAttentionParams(const AttentionParams& p);

// out = attention(q, k, v); lse may be nullptr when no backward follows.
Status AttentionForward(const AttentionParams& p, const void* q, const void* k,
                        const void* v, void* out, float* lse,
                        cudaStream_t stream);

// Bytes of device scratch AttentionBackward needs for these params with the
// default implementation, so a static memory plan can reserve it once: our
// kernels need 4 * batch * n_heads * seq (rounded up to 256); cuDNN's
// deterministic backward about 2 * batch * n_heads * seq^2 more. Pass the same
// params (dtype, strides) as the calls; this builds cuDNN's plans, so call it
// at start-up. A scale of 0 is read as 1/sqrt(head_dim) here.
size_t AttentionBackwardWorkspaceBytes(const AttentionParams& p);

// Gradients of attention given out and lse from AttentionForward on the same
// q, k, v. dq, dk, dv are overwritten (not accumulated). `workspace` must hold
// AttentionBackwardWorkspaceBytes(p) bytes, 16-byte aligned; its contents on
// entry and exit are unspecified.
Status AttentionBackward(const AttentionParams& p, const void* q, const void* k,
                         const void* v, const void* out, const void* dout,
                         const float* lse, void* dq, void* dk, void* dv,
                         void* workspace, size_t workspace_bytes,
                         cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
