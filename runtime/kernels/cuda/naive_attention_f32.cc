#include "runtime/kernels/cuda/naive_attention_f32.h"

#include <string>

#include "runtime/kernels/cuda/naive_attention_f32_launch.h"

namespace hypertrain::kernels::cuda {
namespace {

Status MakeGeometry(const AttentionParams& p, naive_attention::Geometry* g) {
  if (p.batch <= 0 || p.seq <= 0 || p.n_heads <= 0 || p.n_kv_heads <= 0 ||
      p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0 || p.head_dim % 32 != 0 ||
      p.head_dim > 256 || !(p.scale > 0.0f)) {
    return InvalidArgument("naive fp32 attention: bad shape (batch " + std::to_string(p.batch) +
                           ", seq " + std::to_string(p.seq) + ", heads " +
                           std::to_string(p.n_heads) + "/" + std::to_string(p.n_kv_heads) +
                           ", head_dim " + std::to_string(p.head_dim) +
                           "; head_dim must be a multiple of 32, at most 256; scale > 0)");
  }
  g->B = p.batch, g->S = p.seq, g->H = p.n_heads, g->KV = p.n_kv_heads, g->D = p.head_dim;
  g->qs = p.q_row_stride ? p.q_row_stride : static_cast<long>(p.n_heads) * p.head_dim;
  g->ks = p.k_row_stride ? p.k_row_stride : static_cast<long>(p.n_kv_heads) * p.head_dim;
  g->vs = p.v_row_stride ? p.v_row_stride : static_cast<long>(p.n_kv_heads) * p.head_dim;
  g->os = p.o_row_stride ? p.o_row_stride : static_cast<long>(p.n_heads) * p.head_dim;
  g->scale = p.scale;
  return Status::Ok();
}

Status Launched(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

Status NaiveAttentionForwardF32(const AttentionParams& p, const float* q, const float* k,
                                const float* v, float* out, float* lse, cudaStream_t stream) {
  naive_attention::Geometry g;
  HT_RETURN_IF_ERROR(MakeGeometry(p, &g));
  if (!q || !k || !v || !out) return InvalidArgument("naive fp32 attention: null pointer");
  return Launched(naive_attention::Forward(g, q, k, v, out, lse, stream), "naive attention forward");
}

size_t NaiveAttentionBackwardScratchFloats(const AttentionParams& p) {
  return static_cast<size_t>(p.batch) * p.n_heads * p.seq;
}

Status NaiveAttentionBackwardF32(const AttentionParams& p, const float* q, const float* k,
                                 const float* v, const float* out, const float* dout,
                                 const float* lse, float* dq, float* dk, float* dv,
                                 float* scratch, cudaStream_t stream) {
  naive_attention::Geometry g;
  HT_RETURN_IF_ERROR(MakeGeometry(p, &g));
  if (!q || !k || !v || !out || !dout || !lse || !dq || !dk || !dv || !scratch) {
    return InvalidArgument("naive fp32 attention backward: null pointer");
  }
  return Launched(naive_attention::Backward(g, q, k, v, out, dout, lse, dq, dk, dv, scratch, stream),
                  "naive attention backward");
}

}  // namespace hypertrain::kernels::cuda
