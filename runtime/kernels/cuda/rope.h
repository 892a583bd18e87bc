#pragma once
// Rotary position embedding, HF "rotate-half" layout, on [tokens, heads, D]
// rows (token t sits at position t % seq_len). For i < D/2, with
// angle = pos * inv_freq[i] (inv_freq already llama3-scaled by the caller):
//   out[i]       = x[i] * cos - x[i + D/2] * sin
//   out[i + D/2] = x[i + D/2] * cos + x[i] * sin
// The backward pass is the inverse rotation (sin negated). In and out are
// addressed by row strides (elements between tokens) so the same kernel reads
// a fused QKV projection and writes separate Q/K buffers; in == out works.
#include <cuda_runtime.h>

#include <vector>

namespace hypertrain::kernels::cuda {

// Host: the fp32 table [seq_len][D/2] of cos followed by the same of sin,
// computed in double. Upload once at start-up.
std::vector<float> RopeCosSinTable(const std::vector<double>& inv_freq, int seq_len);

template <typename T>
cudaError_t RopeForward(T* out, long out_stride, const T* in, long in_stride, const float* table,
                        int tokens, int seq_len, int heads, int head_dim, cudaStream_t stream);

template <typename T>
cudaError_t RopeBackward(T* dx, long dx_stride, const T* dy, long dy_stride, const float* table,
                         int tokens, int seq_len, int heads, int head_dim, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
