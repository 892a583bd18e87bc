// CudaBackend: packed rows (TokenBatch::positions; see backend.h). Each
// sample of a row is one causal attention call of its own length, after a
// RoPE call whose positions start at 0 with the sample:
//   sample [r, r + len) of the flattened tokens: rope(q, k)[t] at position t - r,
//   att[t] = sum_{r <= s <= t} softmax(q[t].k[s] * scale) v[s]
// which is the CPU reference's document masking (key j visible to query i iff
// i - positions[i] <= j <= i) and its per-sample RoPE.
#include <fmt/format.h>

#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/backends/cuda/packed_segments.h"
#include "runtime/kernels/cuda/attention.h"
#include "runtime/kernels/cuda/naive_attention_f32.h"
#include "runtime/kernels/cuda/rope.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;

Status CudaBackend::SetSegments(const model::TokenBatch& batch) {
  segments_.clear();
  if (batch.positions == nullptr) return Status::Ok();
  const int64_t H = layout_.config().num_attention_heads;
  HT_ASSIGN_OR_RETURN(segments_, PackedSegments(batch.positions, B_, S_, H));
  // PlanActivations' lse buffers hold N * H + 4 * N floats.
  for (const PackedSegment& s : segments_) {
    if (s.lse + H * s.len > N_ * H + 4 * N_) {
      segments_.clear();
      return Internal("packed rows: an lse offset past the planned buffer");
    }
  }
  return Status::Ok();
}

// Our tiled kernels (or the fp32 ones, or `simple` if configured): cuDNN would
// build a plan for every sample length.
static kc::AttentionParams SegmentParams(kc::AttentionParams ap, int len) {
  ap.batch = 1;
  ap.seq = len;
  if (ap.impl != kc::AttentionImpl::kSimple) ap.impl = kc::AttentionImpl::kTiled;
  return ap;
}

Status CudaBackend::SegmentedRopeAttentionForward(const Acts& a) {
  const model::ModelConfig& cfg = layout_.config();
  const int Q = static_cast<int>(cfg.q_dim()), K = static_cast<int>(cfg.kv_dim()),
            H = static_cast<int>(cfg.num_attention_heads),
            KV = static_cast<int>(cfg.num_key_value_heads), D = static_cast<int>(cfg.head_dim());
  const int QKV = Q + 2 * K;
  const size_t es = kc::DTypeSize(dtype_);
  const kc::AttentionParams step = StepAttentionParams();
  for (const PackedSegment& s : segments_) {
    void* qkv = Off(a.qkv, int64_t{s.row} * QKV, es);
    void* att = Off(a.att, int64_t{s.row} * Q, es);
    float* lse = a.lse + s.lse;
    // Positions 0..len-1: the table's rows (seq_len S_, so t % S_ = t).
    HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
      using T = decltype(tag);
      return kc::RopeForward<T>(static_cast<T*>(qkv), QKV, static_cast<T*>(qkv), QKV, rope_table_,
                                s.len, static_cast<int>(S_), H + KV, D, stream_);
    }));
    const kc::AttentionParams ap = SegmentParams(step, s.len);
    if (dtype_ == kc::DType::kF32) {
      const float* q = static_cast<const float*>(qkv);
      HT_RETURN_IF_ERROR(kc::NaiveAttentionForwardF32(ap, q, q + Q, q + Q + K,
                                                      static_cast<float*>(att), lse, stream_));
    } else {
      HT_RETURN_IF_ERROR(kc::AttentionForward(ap, qkv, Off(qkv, Q, es), Off(qkv, Q + K, es), att,
                                              lse, stream_));
    }
  }
  profile_.Mark(Op::kAttention, stream_);  // RoPE included
  return Status::Ok();
}

Status CudaBackend::SegmentedAttentionRopeBackward(const Acts& a, const void* datt, void* dqkv) {
  const model::ModelConfig& cfg = layout_.config();
  const int Q = static_cast<int>(cfg.q_dim()), K = static_cast<int>(cfg.kv_dim()),
            H = static_cast<int>(cfg.num_attention_heads),
            KV = static_cast<int>(cfg.num_key_value_heads), D = static_cast<int>(cfg.head_dim());
  const int QKV = Q + 2 * K;
  const size_t es = kc::DTypeSize(dtype_);
  const kc::AttentionParams step = StepAttentionParams();
  for (const PackedSegment& s : segments_) {
    const void* qkv = Off(static_cast<const void*>(a.qkv), int64_t{s.row} * QKV, es);
    const void* att = Off(static_cast<const void*>(a.att), int64_t{s.row} * Q, es);
    const void* dout = Off(datt, int64_t{s.row} * Q, es);
    void* dq = Off(dqkv, int64_t{s.row} * QKV, es);
    const float* lse = a.lse + s.lse;
    const kc::AttentionParams ap = SegmentParams(step, s.len);
    if (dtype_ == kc::DType::kF32) {
      const float* q = static_cast<const float*>(qkv);
      float* d = static_cast<float*>(dq);
      HT_RETURN_IF_ERROR(kc::NaiveAttentionBackwardF32(
          ap, q, q + Q, q + Q + K, static_cast<const float*>(att),
          static_cast<const float*>(dout), lse, d, d + Q, d + Q + K,
          static_cast<float*>(attn_ws_), stream_));
    } else {
      HT_RETURN_IF_ERROR(kc::AttentionBackward(ap, qkv, Off(qkv, Q, es), Off(qkv, Q + K, es), att,
                                               dout, lse, dq, Off(dq, Q, es), Off(dq, Q + K, es),
                                               attn_ws_, attn_ws_bytes_, stream_));
    }
    HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
      using T = decltype(tag);
      return kc::RopeBackward<T>(static_cast<T*>(dq), QKV, static_cast<T*>(dq), QKV, rope_table_,
                                 s.len, static_cast<int>(S_), H + KV, D, stream_);
    }));
  }
  profile_.Mark(Op::kAttention, stream_);  // inverse RoPE included
  return Status::Ok();
}

}  // namespace hypertrain::cuda
