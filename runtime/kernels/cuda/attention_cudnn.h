#pragma once
// cuDNN fused flash attention (causal, GQA) behind the contract of attention.h.
//
// Built on cuDNN's backend graph API (no cudnn-frontend): the forward is the
// operation graph cuDNN's fused-attention engines recognise
//   S = Q K^T; S *= scale; causal mask (GEN_INDEX row/col, CMP_GE,
//   BINARY_SELECT); softmax with statistics (max, sub, exp, sum, div;
//   stats = max + log(sum)); O = P V
// and the backward the matching gradient graph. cuDNN's "stats" output is
// exactly our lse (natural log of the sum of exp(scale q.k)), so a cuDNN
// forward can feed either backward.
//
// Plans are built once per (device, params incl. strides, dtype, direction,
// backward mode), cached behind a mutex and reused; one cudnnHandle per device
// (its stream is set before every execute). Building a plan can take a while,
// so do it at start-up: BackwardWorkspaceBytes (called when the memory plan is
// made) builds both directions.
//
// Backward modes:
//  - kDeterministic: the graph form in which dQ is written by one matmul (no
//    fp32 dQ accumulator updated with atomics); cuDNN then uses its
//    "dP workspace" decomposition, bitwise reproducible, with a workspace of
//    about 2 * batch * n_heads * seq^2 bytes. Engines cuDNN tags
//    NONDETERMINISTIC are skipped. To bound that workspace the backward runs
//    over chunks of the batch (the largest divisor of the batch whose
//    workspace fits p.cudnn_bwd_workspace_cap_bytes, default 2 GiB; samples are
//    independent, so the result does not depend on the chunking).
//  - kFast: cuDNN's default graph (fp32 dQ accumulator in the workspace,
//    atomics): faster, smaller workspace, NOT bitwise reproducible.
//
// Errors: FailedPrecondition when cuDNN cannot run these params here (no
// library, no engine, unsupported shape), with cuDNN's own message;
// InvalidArgument for a workspace that is too small.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/status.h"
#include "runtime/kernels/cuda/attention.h"

namespace hypertrain::kernels::cuda::cudnn_attention {

enum class BackwardMode { kDeterministic, kFast };
const char* BackwardModeName(BackwardMode mode);


// cudnnGetVersion() of the loaded library, e.g. 91900.
size_t LoadedVersion();

// Builds (or finds) the forward plan for p on the current device: Ok when
// cuDNN can run the forward, else the reason it cannot. p must be valid
// (ValidateAttentionParams) and bf16 or fp16.
Status PrepareForward(const AttentionParams& p);

// Device scratch Backward needs for p in `mode` (softmax row sums, the fp32 dQ
// accumulator in kFast, and the plan's own workspace), building the plan if
// needed; an error when cuDNN cannot run this backward.
StatusOr<size_t> BackwardWorkspaceBytes(const AttentionParams& p, BackwardMode mode);

// out (and lse when not null) = attention(q, k, v), asynchronous on stream.
Status Forward(const AttentionParams& p, const void* q, const void* k, const void* v, void* out,
               float* lse, cudaStream_t stream);

// dq, dk, dv (overwritten) from q, k, v, out, dout and the forward's lse.
// workspace must hold BackwardWorkspaceBytes(p, mode) bytes, 16-byte aligned.
Status Backward(const AttentionParams& p, BackwardMode mode, const void* q, const void* k,
                const void* v, const void* out, const void* dout, const float* lse, void* dq,
                void* dk, void* dv, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda::cudnn_attention
