#pragma once
// CPU reference ops for the Llama-3 decoder: forward AND backward, for float
// and double. Plain, obviously-correct loops (GEMMs through OpenBLAS). They
// are the oracle every CUDA kernel is tested against, so the signatures are raw
// pointers + shapes with no framework types.
//
// Conventions:
//  - Row-major. N = number of token rows (batch * seq); C = hidden size.
//  - Activations of attention are [B, T, heads, D] == rows of a [N, heads*D]
//    matrix, i.e. exactly the q/k/v projection outputs.
//  - Backward functions ADD (+=) into every gradient output (activation and
//    parameter gradients alike) unless the comment says "writes"; a null
//    gradient pointer means "not needed".
//  - Linear weights are HF-shaped [out_features, in_features]: y = x W^T.
#include <cstdint>

#include "runtime/model/config.h"
#include "runtime/model/peft.h"

namespace hypertrain::cpu {

// ---- Linear --------------------------------------------------------------
// out[N, OF] = in[N, IF] @ w[OF, IF]^T   (+= when accumulate).
template <typename T>
void Matmul(T* out, const T* in, const T* w, int64_t N, int64_t in_features,
            int64_t out_features, bool accumulate = false);
// din[N, IF] += dout @ w;   dw[OF, IF] += dout^T @ in.
template <typename T>
void MatmulBackward(T* din, T* dw, const T* dout, const T* in, const T* w, int64_t N,
                    int64_t in_features, int64_t out_features);

// ---- Embedding -----------------------------------------------------------
// out[N, C] = table[tokens[n]]   (writes). Tokens must be in [0, V).
template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const T* table, int64_t N, int64_t C);
// dtable[tokens[n]] += dout[n] in increasing n: deterministic.
template <typename T>
void EmbeddingBackward(T* dtable, const T* dout, const int32_t* tokens, int64_t N, int64_t C);
// HSDP's split embedding gradient: the backward of `ranks` ranks' micro-
// batches (tokens/dout hold ranks x n rows, rank r's at r*n), restricted to
// the flat table elements [lo, hi) (rows may be cut at both ends) and averaged
// like a reduce-scatter. For each element e = v*C + c in [lo, hi):
//   dst[e - lo] += (P_0 + P_1 + ... + P_{R-1}) * (1/R)
// where P_r is the fp32 sum, in increasing row order, of dout[row][c] over
// rank r's rows with token v (ranks without one contribute nothing), the P_r
// added in rank order in fp32 — or, bf16_reduce, each P_r and each running
// sum rounded to bf16 (round-to-nearest-even), as a bf16 reduce-scatter does.
// Deterministic; the CUDA kernel (kernels/cuda/embedding.h) matches it bit
// for bit. Tokens must be in [0, V), 0 <= lo <= hi <= V*C.
template <typename T>
void EmbeddingBackwardRange(float* dst, int64_t lo, int64_t hi, const T* dout,
                            const int32_t* tokens, int64_t n, int ranks, int64_t C,
                            bool bf16_reduce);

// ---- RMSNorm -------------------------------------------------------------
// out = x * rstd * w, rstd[n] = 1 / sqrt(mean(x[n]^2) + eps)   (writes out and
// rstd; rstd may be null). out may not alias x.
template <typename T>
void RmsNormForward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps);
// dx += ..., dw += ... given the forward's rstd.
template <typename T>
void RmsNormBackward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                     int64_t N, int64_t C);

// ---- RoPE (rotate-half, HF layout) ----------------------------------------
// cos/sin tables [seq, head_dim/2] for positions 0..seq-1 (computed in fp64
// from model::RopeInvFreq, runtime/model/math.h).
template <typename T>
void RopeTables(T* cos, T* sin, int64_t seq, int64_t head_dim, double theta,
                const model::RopeScaling& s);
// x: [B, T, heads, D]; pairs (i, i + D/2) rotate by angle p * inv_freq[i],
// p = positions[b*T + t] (packed samples, see AttentionForward), or t when
// positions is null. Writes out; out may alias in.
template <typename T>
void RopeForward(T* out, const T* in, const T* cos, const T* sin, int64_t B, int64_t T_,
                 int64_t heads, int64_t D, const int32_t* positions = nullptr);
// Inverse rotation of the gradient. Writes din; din may alias dout.
template <typename T>
void RopeBackward(T* din, const T* dout, const T* cos, const T* sin, int64_t B, int64_t T_,
                  int64_t heads, int64_t D, const int32_t* positions = nullptr);

// ---- Causal grouped-query attention --------------------------------------
// q, out: [B, T, H, D]; k, v: [B, T, KV, D]; query head h uses kv head
// h / (H / KV); scale 1/sqrt(D); key j visible to query i iff j <= i.
// Packed samples (document masking): with positions [B, T] (each row holds
// whole samples back to back, positions counting 0, 1, ... within each), key
// j is visible to query i iff i - positions[i] <= j <= i: attention stays
// inside the sample. positions[t] must be 0 or positions[t-1] + 1.
// Writes out and lse[B, H, T] (natural-log log-sum-exp of the scaled scores,
// what flash attention saves for backward).
template <typename T>
void AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t T_,
                      int64_t H, int64_t KV, int64_t D, const int32_t* positions = nullptr);
// dq, dk, dv += gradients; recomputes probabilities from q, k and lse.
template <typename T>
void AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                       const T* out, const T* lse, int64_t B, int64_t T_, int64_t H, int64_t KV,
                       int64_t D, const int32_t* positions = nullptr);

// ---- SwiGLU MLP activation -----------------------------------------------
// out = silu(gate) * up   (writes; out may alias gate or up).
template <typename T>
void SwiGluForward(T* out, const T* gate, const T* up, int64_t n);
// dgate += dout * up * silu'(gate);  dup += dout * silu(gate).
template <typename T>
void SwiGluBackward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

// ---- LoRA adapter (runtime/model/peft.h) -----------------------------------
// One target projection's adapter beside its frozen weight (x [N, IF],
// A [r, IF], B [OF, r], s = alpha / rank):
//   u = dropout(x)                       (mask.active(): u = x * keep * scale)
//   t = s * (u A^T)                      [N, r], kept for backward
//   out += t B^T
// `u_scratch` [N, IF] is needed only with an active mask.
template <typename T>
void LoraForward(T* out, T* t, T* u_scratch, const T* x, const T* a, const T* b, int64_t N,
                 int64_t in_features, int64_t out_features, int64_t rank, double scaling,
                 const model::DropoutMask& mask);
// dB += dout^T t;  dt = s * (dout B) [N, r] (scratch);  dA += dt^T u;
// dx += dropout'(dt A) (null dx: not needed). u is drawn again from x and the
// mask into u_scratch.
template <typename T>
void LoraBackward(T* dx, T* da, T* db, T* dt_scratch, T* u_scratch, const T* dout, const T* x,
                  const T* t, const T* a, const T* b, int64_t N, int64_t in_features,
                  int64_t out_features, int64_t rank, double scaling,
                  const model::DropoutMask& mask);
// u = x * keep(i) * scale over n elements (writes).
template <typename T>
void DropoutForward(T* u, const T* x, int64_t n, const model::DropoutMask& mask);

// ---- Residual ------------------------------------------------------------
// out = a + b (writes; out may alias a or b).
template <typename T>
void Add(T* out, const T* a, const T* b, int64_t n);

// ---- Loss ----------------------------------------------------------------
struct LossSum {
  double loss_sum = 0;  // sum of per-token cross-entropy (nats)
  int64_t count = 0;    // tokens whose target != ignore_index
};
// Plain cross-entropy over materialised logits [N, V]: losses[n] = -log
// softmax(logits[n])[target] (0 for ignored rows; losses may be null).
// dlogits (if non-null) += dloss * (softmax - onehot) per non-ignored row.
template <typename T>
LossSum CrossEntropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                     int64_t V, int32_t ignore_index, double dloss);
// LM head + cross-entropy fused: logits = h[N, C] @ w[V, C]^T are built
// `chunk_rows` rows at a time, so at most chunk_rows x V logits exist. When
// dh / dw are non-null, ADDS the gradient of dloss * sum(per-token loss)
// (the caller passes dloss = grad_multiplier / count for a mean loss).
template <typename T>
LossSum FusedClassifier(T* dh, T* dw, const T* h, const T* w, const int32_t* targets, int64_t N,
                        int64_t C, int64_t V, int32_t ignore_index, double dloss,
                        int64_t chunk_rows = 256);

// ---- Reductions ------------------------------------------------------------
// Sum of squares in fp64 (inf/nan propagate).
template <typename T>
double SumSquares(const T* x, int64_t n);

}  // namespace hypertrain::cpu
