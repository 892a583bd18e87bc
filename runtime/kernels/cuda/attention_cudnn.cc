// cuDNN fused attention: the forward/backward operation graphs, a plan cache
// and execution. Graph shapes follow cuDNN's fused-attention ("flash") pattern.
#include "runtime/kernels/cuda/attention_cudnn.h"

#include <cudnn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include <spdlog/spdlog.h>

#include "runtime/kernels/cuda/attention_cudnn_graph.h"

namespace hypertrain::kernels::cuda::cudnn_attention {
namespace {

using internal::Descriptor;
using internal::Dims;
using internal::GraphBuilder;

// Variant-pack uids of the non-virtual tensors.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kSoftmaxSum,
  kDQAccum,
  kNegInf,
  kOne,
};

// Mask value of hidden scores (as cuDNN's own graphs use): exp() of it minus
// any real row maximum is exactly 0.
constexpr float kMaskValue = -3.4028234663852886e38f;  // lowest float

enum class Kind { kForward, kForwardNoStats, kBackwardDeterministic, kBackwardFast };

size_t RoundUp(size_t x) { return (x + 255) / 256 * 256; }

struct Geometry {
  int64_t b, s, h, kv, d, qs, ks, vs, os;
  cudnnDataType_t io;
};

Geometry Resolve(const AttentionParams& p) {
  Geometry g;
  g.b = p.batch, g.s = p.seq, g.h = p.n_heads, g.kv = p.n_kv_heads, g.d = p.head_dim;
  g.qs = p.q_row_stride != 0 ? p.q_row_stride : g.h * g.d;
  g.ks = p.k_row_stride != 0 ? p.k_row_stride : g.kv * g.d;
  g.vs = p.v_row_stride != 0 ? p.v_row_stride : g.kv * g.d;
  g.os = p.o_row_stride != 0 ? p.o_row_stride : g.h * g.d;
  g.io = p.dtype == AttentionDtype::kFp16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  return g;
}

// [batch, heads, seq, head_dim] view of our token-major layout.
Dims Bhsd(const Geometry& g, int64_t row_stride) {
  return {g.s * row_stride, g.d, row_stride, 1};
}

// Scores of one graph: [b, h, s, s] dense fp32, and per-row statistics.
Dims ScoreDims(const Geometry& g) { return {g.b, g.h, g.s, g.s}; }
Dims ScoreStrides(const Geometry& g) { return {g.h * g.s * g.s, g.s * g.s, g.s, 1}; }
Dims RowDims(const Geometry& g) { return {g.b, g.h, g.s, 1}; }
Dims RowStrides(const Geometry& g) { return {g.h * g.s, g.s, 1, 1}; }
// A new virtual fp32 score tensor / per-row statistic of the graph.
int64_t ScoreF32(GraphBuilder& gb, const Geometry& g) {
  return gb.Virtual(ScoreDims(g), ScoreStrides(g), CUDNN_DATA_FLOAT);
}
int64_t RowF32(GraphBuilder& gb, const Geometry& g) {
  return gb.Virtual(RowDims(g), RowStrides(g), CUDNN_DATA_FLOAT);
}

// Causal mask of a [b, h, s, s] fp32 score tensor: keeps (row >= col), sets
// the rest to kMaskValue. Returns the masked tensor.
int64_t CausalMask(GraphBuilder& gb, const Geometry& g, int64_t score) {
  const int64_t row = gb.Virtual(ScoreDims(g), ScoreStrides(g), CUDNN_DATA_INT32);
  const int64_t col = gb.Virtual(ScoreDims(g), ScoreStrides(g), CUDNN_DATA_INT32);
  const int64_t keep = gb.Virtual(ScoreDims(g), ScoreStrides(g), CUDNN_DATA_BOOLEAN);
  const int64_t masked = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_GEN_INDEX, score, row, -1, -1, CUDNN_DATA_INT32, 2);
  gb.Pointwise(CUDNN_POINTWISE_GEN_INDEX, score, col, -1, -1, CUDNN_DATA_INT32, 3);
  gb.Pointwise(CUDNN_POINTWISE_CMP_GE, row, keep, col, -1, CUDNN_DATA_BOOLEAN);
  gb.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, score, masked, kNegInf, keep);
  return masked;
}

void BuildForward(GraphBuilder& gb, const Geometry& g, bool with_stats) {
  const Dims q_dims = {g.b, g.h, g.s, g.d};
  gb.Tensor(kQ, q_dims, Bhsd(g, g.qs), g.io);
  gb.Tensor(kK, {g.b, g.kv, g.d, g.s}, {g.s * g.ks, g.d, 1, g.ks}, g.io);  // K^T view
  gb.Tensor(kV, {g.b, g.kv, g.s, g.d}, Bhsd(g, g.vs), g.io);
  gb.Tensor(kO, q_dims, Bhsd(g, g.os), g.io);
  gb.Scalar(kScale);
  gb.Scalar(kNegInf);
  const int64_t qk = ScoreF32(gb, g);
  gb.Matmul(kQ, kK, qk);
  const int64_t scaled = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_MUL, qk, scaled, kScale);
  const int64_t masked = CausalMask(gb, g, scaled);
  // Softmax with statistics: stats = max + log(sum exp(x - max)).
  const int64_t max = RowF32(gb, g);
  gb.Reduce(CUDNN_REDUCE_TENSOR_MAX, masked, max);
  const int64_t centred = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_SUB, masked, centred, max);
  const int64_t e = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_EXP, centred, e);
  const int64_t sum = RowF32(gb, g);
  gb.Reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t log_sum = RowF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_LOG, sum, log_sum);
  int64_t stats = kStats;
  if (with_stats) {
    gb.Tensor(kStats, RowDims(g), RowStrides(g), CUDNN_DATA_FLOAT);
  } else {
    stats = RowF32(gb, g);
  }
  gb.Pointwise(CUDNN_POINTWISE_ADD, max, stats, log_sum);
  // P in the input type feeds the second matmul.
  const int64_t prob = gb.Virtual(ScoreDims(g), ScoreStrides(g), g.io);
  gb.Pointwise(CUDNN_POINTWISE_DIV, e, prob, sum);
  gb.Matmul(prob, kV, kO);
}

// dX of shape [b, h, s, d] summed over the query heads of each kv head when
// GQA: a full-head virtual result reduced into the [b, kv, s, d] output.
void GroupedMatmul(GraphBuilder& gb, const Geometry& g, int64_t a, int64_t b, int64_t out) {
  if (g.h == g.kv) {
    gb.Matmul(a, b, out);
    return;
  }
  const int64_t full =
      gb.Virtual({g.b, g.h, g.s, g.d}, {g.h * g.s * g.d, g.s * g.d, g.d, 1}, g.io);
  gb.Matmul(a, b, full);
  gb.Reduce(CUDNN_REDUCE_TENSOR_ADD, full, out);
}

// k_view_type: type of the virtual [b, kv, s, d] view of K^T feeding dQ = dS K
// (fp32 as cuDNN's own graphs declare it; the input type is tried second).
void BuildBackward(GraphBuilder& gb, const Geometry& g, bool deterministic,
                   cudnnDataType_t k_view_type) {
  const Dims q_dims = {g.b, g.h, g.s, g.d};
  const Dims kv_dims = {g.b, g.kv, g.s, g.d};
  gb.Tensor(kQ, q_dims, Bhsd(g, g.qs), g.io);
  gb.Tensor(kK, {g.b, g.kv, g.d, g.s}, {g.s * g.ks, g.d, 1, g.ks}, g.io);  // K^T view
  gb.Tensor(kV, {g.b, g.kv, g.d, g.s}, {g.s * g.vs, g.d, 1, g.vs}, g.io);  // V^T view
  gb.Tensor(kO, q_dims, Bhsd(g, g.os), g.io);
  gb.Tensor(kDO, q_dims, Bhsd(g, g.os), g.io);
  gb.Tensor(kStats, RowDims(g), RowStrides(g), CUDNN_DATA_FLOAT);
  gb.Tensor(kDQ, q_dims, Bhsd(g, g.qs), g.io);
  gb.Tensor(kDK, kv_dims, Bhsd(g, g.ks), g.io);
  gb.Tensor(kDV, kv_dims, Bhsd(g, g.vs), g.io);
  gb.Tensor(kSoftmaxSum, RowDims(g), RowStrides(g), CUDNN_DATA_FLOAT);  // in the workspace
  gb.Scalar(kScale);
  gb.Scalar(kNegInf);
  gb.Scalar(kOne);

  // softmax_sum = rowsum(dO * O)
  const int64_t dout_out =
      gb.Virtual(q_dims, {g.h * g.s * g.d, g.s * g.d, g.h * g.d, 1}, CUDNN_DATA_FLOAT);
  gb.Pointwise(CUDNN_POINTWISE_MUL, kDO, dout_out, kO);
  const int64_t row_sum = RowF32(gb, g);
  gb.Reduce(CUDNN_REDUCE_TENSOR_ADD, dout_out, row_sum);
  gb.Pointwise(CUDNN_POINTWISE_MUL, row_sum, kSoftmaxSum, kOne);

  // P = exp(mask(scale * Q K^T - stats))
  const int64_t qk = ScoreF32(gb, g);
  gb.Matmul(kQ, kK, qk);
  const int64_t scaled = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_MUL, qk, scaled, kScale);
  const int64_t centred = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_SUB, scaled, centred, kStats);
  const int64_t masked = CausalMask(gb, g, centred);
  const int64_t prob = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_EXP, masked, prob);

  // Transposed score views ([b, h, s_kv, s_q]) in the input type.
  const Dims t_strides = {g.h * g.s * g.s, g.s * g.s, 1, g.s};
  const int64_t prob_t = gb.Virtual(ScoreDims(g), t_strides, g.io);
  gb.Reshape(prob, prob_t);
  GroupedMatmul(gb, g, prob_t, kDO, kDV);  // dV = P^T dO

  // dS = scale * P * (dO V^T - softmax_sum)
  const int64_t dp = ScoreF32(gb, g);
  gb.Matmul(kDO, kV, dp);
  const int64_t dp_centred = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_SUB, dp, dp_centred, kSoftmaxSum);
  const int64_t dp_prob = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_MUL, dp_centred, dp_prob, prob);
  const int64_t ds = ScoreF32(gb, g);
  gb.Pointwise(CUDNN_POINTWISE_MUL, dp_prob, ds, kScale);
  const int64_t ds_t = gb.Virtual(ScoreDims(g), t_strides, g.io);
  gb.Reshape(ds, ds_t);
  GroupedMatmul(gb, g, ds_t, kQ, kDK);  // dK = dS^T Q

  // dQ = dS K (K^T viewed back as [b, kv, s, d]).
  const int64_t k_view = gb.Virtual(kv_dims, {g.s * g.ks, g.d, g.ks, 1}, k_view_type);
  gb.Reshape(kK, k_view);
  if (deterministic) {
    gb.Matmul(ds, k_view, kDQ);
  } else {
    gb.Tensor(kDQAccum, q_dims, {g.h * g.s * g.d, g.s * g.d, g.d, 1}, CUDNN_DATA_FLOAT);
    gb.Matmul(ds, k_view, kDQAccum);
    gb.Pointwise(CUDNN_POINTWISE_IDENTITY, kDQAccum, kDQ);
  }
}

struct Plan {
  // The graph's descriptors stay alive as long as the plan made from them.
  std::unique_ptr<GraphBuilder> builder;
  Descriptor graph;
  Descriptor config;
  Descriptor plan;
  int64_t workspace = 0;  // the plan's own workspace
  void* owned_workspace = nullptr;  // forward only: allocated once at build
  ~Plan() {
    if (owned_workspace != nullptr) cudaFree(owned_workspace);
  }
};

using Key = std::tuple<int, Kind, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int>;

class Cache {
 public:
  static Cache& Get() {
    static Cache* cache = new Cache();  // never destroyed: plans outlive static teardown
    return *cache;
  }

  // The plan for p (built on first use), or why there is none.
  Status Find(const AttentionParams& p, Kind kind, std::shared_ptr<Plan>* plan,
              cudnnHandle_t* handle) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
      return FailedPrecondition("cudnn attention: no current CUDA device");
    }
    const Geometry g = Resolve(p);
    const Key key{device, kind, g.b, g.s, g.h, g.kv, g.d, g.qs, g.ks, g.vs, g.os, int(g.io)};
    std::lock_guard<std::mutex> lock(mu_);
    HT_RETURN_IF_ERROR(HandleLocked(device, handle));
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Entry e;
      e.status = BuildLocked(g, kind, *handle, &e.plan);
      it = plans_.emplace(key, std::move(e)).first;
    }
    HT_RETURN_IF_ERROR(it->second.status);
    *plan = it->second.plan;
    return Status::Ok();
  }

  std::mutex& exec_mu() { return exec_mu_; }

 private:
  struct Entry {
    Status status;
    std::shared_ptr<Plan> plan;
  };

  Status HandleLocked(int device, cudnnHandle_t* handle) {
    auto it = handles_.find(device);
    if (it == handles_.end()) {
      cudnnHandle_t h = nullptr;
      const cudnnStatus_t st = cudnnCreate(&h);
      if (st != CUDNN_STATUS_SUCCESS) {
        return FailedPrecondition(internal::CudnnMessage(st, "cudnnCreate"));
      }
      it = handles_.emplace(device, h).first;
    }
    *handle = it->second;
    return Status::Ok();
  }

  static Status BuildLocked(const Geometry& g, Kind kind, cudnnHandle_t handle,
                            std::shared_ptr<Plan>* out) {
    if (LoadedVersion() < 90000) {
      return FailedPrecondition("cudnn attention: needs cuDNN >= 9.0, loaded " +
                                std::to_string(LoadedVersion()));
    }
    auto plan = std::make_shared<Plan>();
    std::string tried;
    Status st;
    for (cudnnDataType_t k_view_type : {CUDNN_DATA_FLOAT, g.io}) {
      auto builder = std::make_unique<GraphBuilder>();
      GraphBuilder& gb = *builder;
      switch (kind) {
        case Kind::kForward:
        case Kind::kForwardNoStats:
          BuildForward(gb, g, kind == Kind::kForward);
          break;
        case Kind::kBackwardDeterministic:
        case Kind::kBackwardFast:
          BuildBackward(gb, g, kind == Kind::kBackwardDeterministic, k_view_type);
          break;
      }
      Descriptor graph;
      st = gb.Build(handle, &graph);
      if (st.ok()) {
        st = internal::MakePlan(handle, graph, kind == Kind::kBackwardDeterministic, &plan->plan,
                                &plan->config, &plan->workspace, &tried);
      }
      if (st.ok()) {
        plan->builder = std::move(builder);
        plan->graph = std::move(graph);
      }
      const bool backward = kind == Kind::kBackwardDeterministic || kind == Kind::kBackwardFast;
      if (st.ok() || !backward) break;
    }
    HT_RETURN_IF_ERROR(st);
    const bool forward = kind == Kind::kForward || kind == Kind::kForwardNoStats;
    if (forward && plan->workspace > 0) {
      // The public forward takes no workspace: give the plan its own, once.
      if (cudaMalloc(&plan->owned_workspace, size_t(plan->workspace)) != cudaSuccess) {
        cudaGetLastError();
        plan->owned_workspace = nullptr;
        return FailedPrecondition("cudnn attention: cannot allocate the forward workspace (" +
                                  std::to_string(plan->workspace) + " bytes)");
      }
    }
    *out = std::move(plan);
    return Status::Ok();
  }

  std::mutex mu_;       // guards handles_ and plans_
  std::mutex exec_mu_;  // serialises cudnnSetStream + execute on a shared handle
  std::map<int, cudnnHandle_t> handles_;
  std::map<Key, Entry> plans_;
};

Status Execute(cudnnHandle_t handle, const Plan& plan, const int64_t* uids, void* const* ptrs,
               int64_t n, void* workspace, cudaStream_t stream) {
  Descriptor pack;
  HT_RETURN_IF_ERROR(pack.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  HT_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
  HT_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
  HT_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  HT_RETURN_IF_ERROR(pack.Finalize("variant pack"));
  std::lock_guard<std::mutex> lock(Cache::Get().exec_mu());
  cudnnStatus_t st = cudnnSetStream(handle, stream);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(handle, plan.plan.get(), pack.get());
  if (st != CUDNN_STATUS_SUCCESS) return Internal(internal::CudnnMessage(st, "execute"));
  return Status::Ok();
}

Kind BackwardKind(BackwardMode mode) {
  return mode == BackwardMode::kFast ? Kind::kBackwardFast : Kind::kBackwardDeterministic;
}

// Workspace layout of the backward: [softmax_sum][dQ accumulator (fast)][plan].
size_t SoftmaxSumBytes(const AttentionParams& p) {
  return RoundUp(sizeof(float) * size_t(p.batch) * p.n_heads * p.seq);
}
size_t DqAccumBytes(const AttentionParams& p, BackwardMode mode) {
  if (mode != BackwardMode::kFast) return 0;
  return RoundUp(sizeof(float) * size_t(p.batch) * p.n_heads * p.seq * p.head_dim);
}

Status CheckDtype(const AttentionParams& p) {
  if (p.dtype == AttentionDtype::kFp32) {
    return FailedPrecondition("cudnn attention: fp32 is not supported (bf16/fp16 only)");
  }
  return Status::Ok();
}

}  // namespace

const char* BackwardModeName(BackwardMode mode) {
  return mode == BackwardMode::kFast ? "fast (nondeterministic)" : "deterministic";
}

size_t LoadedVersion() { return cudnnGetVersion(); }

Status PrepareForward(const AttentionParams& p) {
  HT_RETURN_IF_ERROR(CheckDtype(p));
  std::shared_ptr<Plan> plan;
  cudnnHandle_t handle;
  HT_RETURN_IF_ERROR(Cache::Get().Find(p, Kind::kForward, &plan, &handle));
  return Cache::Get().Find(p, Kind::kForwardNoStats, &plan, &handle);
}

namespace {

// Workspace of one backward execute over p (its plan built if needed).
StatusOr<size_t> OneCallWorkspaceBytes(const AttentionParams& p, BackwardMode mode) {
  std::shared_ptr<Plan> plan;
  cudnnHandle_t handle;
  HT_RETURN_IF_ERROR(Cache::Get().Find(p, BackwardKind(mode), &plan, &handle));
  return SoftmaxSumBytes(p) + DqAccumBytes(p, mode) + RoundUp(size_t(plan->workspace));
}

// The deterministic backward's workspace grows with batch * heads * seq^2
// (1.07 GB for 1b at 4 x 2048), so it runs over chunks of the batch: the
// largest divisor of the batch whose one-call workspace fits
// p.cudnn_bwd_workspace_cap_bytes (cuda.cudnn_bwd_workspace_mb, default 2048
// MiB: 125m at 16 x 2048 and 1b at 4 x 2048 run unchunked). Each extra call costs its own
// launches and wave tail (measured on an H200: 125m in chunks of 4 samples lost
// ~4% of the step against one call, chunks of 2 lost 10%), so fewer is better.
// Samples are independent, so the result does not depend on the chunking.
StatusOr<int> ChunkBatch(const AttentionParams& p, BackwardMode mode) {
  if (mode != BackwardMode::kDeterministic || p.batch <= 1) return p.batch;
  const size_t cap = p.cudnn_bwd_workspace_cap_bytes;
  int cb = p.batch;
  while (cb > 1) {
    AttentionParams pc = p;
    pc.batch = cb;
    HT_ASSIGN_OR_RETURN(const size_t bytes, OneCallWorkspaceBytes(pc, mode));
    if (bytes <= cap) break;
    do {
      --cb;
    } while (p.batch % cb != 0);
  }
  return cb;
}

}  // namespace


StatusOr<size_t> BackwardWorkspaceBytes(const AttentionParams& p, BackwardMode mode) {
  HT_RETURN_IF_ERROR(CheckDtype(p));
  HT_ASSIGN_OR_RETURN(const int cb, ChunkBatch(p, mode));
  AttentionParams pc = p;
  pc.batch = cb;
  return OneCallWorkspaceBytes(pc, mode);
}

Status Forward(const AttentionParams& p, const void* q, const void* k, const void* v, void* out,
               float* lse, cudaStream_t stream) {
  HT_RETURN_IF_ERROR(CheckDtype(p));
  std::shared_ptr<Plan> plan;
  cudnnHandle_t handle;
  const Kind kind = lse != nullptr ? Kind::kForward : Kind::kForwardNoStats;
  HT_RETURN_IF_ERROR(Cache::Get().Find(p, kind, &plan, &handle));
  float scale = p.scale, mask = kMaskValue;
  int64_t uids[7] = {kQ, kK, kV, kO, kScale, kNegInf, kStats};
  void* ptrs[7] = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), out,
                   &scale, &mask, lse};
  return Execute(handle, *plan, uids, ptrs, lse != nullptr ? 7 : 6, plan->owned_workspace, stream);
}

namespace {
Status BackwardOneCall(const AttentionParams& p, BackwardMode mode, const void* q, const void* k,
                       const void* v, const void* out, const void* dout, const float* lse,
                       void* dq, void* dk, void* dv, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream);
}  // namespace

Status Backward(const AttentionParams& p, BackwardMode mode, const void* q, const void* k,
                const void* v, const void* out, const void* dout, const float* lse, void* dq,
                void* dk, void* dv, void* workspace, size_t workspace_bytes,
                cudaStream_t stream) {
  HT_RETURN_IF_ERROR(CheckDtype(p));
  HT_ASSIGN_OR_RETURN(const int cb, ChunkBatch(p, mode));
  if (cb == p.batch) {
    return BackwardOneCall(p, mode, q, k, v, out, dout, lse, dq, dk, dv, workspace,
                           workspace_bytes, stream);
  }
  const Geometry g = Resolve(p);
  const size_t es = 2;  // bf16 / fp16
  AttentionParams pc = p;
  pc.batch = cb;
  auto at = [&](const void* base, int64_t row_stride, int c) {
    return static_cast<const char*>(base) + size_t(c) * cb * g.s * row_stride * es;
  };
  auto at_mut = [&](void* base, int64_t row_stride, int c) {
    return const_cast<char*>(at(base, row_stride, c));
  };
  for (int c = 0; c < p.batch / cb; ++c) {
    HT_RETURN_IF_ERROR(BackwardOneCall(
        pc, mode, at(q, g.qs, c), at(k, g.ks, c), at(v, g.vs, c), at(out, g.os, c),
        at(dout, g.os, c), lse + size_t(c) * cb * g.h * g.s, at_mut(dq, g.qs, c),
        at_mut(dk, g.ks, c), at_mut(dv, g.vs, c), workspace, workspace_bytes, stream));
  }
  return Status::Ok();
}

namespace {
Status BackwardOneCall(const AttentionParams& p, BackwardMode mode, const void* q, const void* k,
                       const void* v, const void* out, const void* dout, const float* lse,
                       void* dq, void* dk, void* dv, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream) {
  std::shared_ptr<Plan> plan;
  cudnnHandle_t handle;
  HT_RETURN_IF_ERROR(Cache::Get().Find(p, BackwardKind(mode), &plan, &handle));
  const size_t sum_bytes = SoftmaxSumBytes(p), acc_bytes = DqAccumBytes(p, mode);
  const size_t need = sum_bytes + acc_bytes + RoundUp(size_t(plan->workspace));
  if (workspace_bytes < need) {
    return InvalidArgument("cudnn attention: backward workspace holds " +
                           std::to_string(workspace_bytes) + " bytes, needs " +
                           std::to_string(need));
  }
  char* ws = static_cast<char*>(workspace);
  void* softmax_sum = ws;
  void* dq_accum = ws + sum_bytes;
  void* plan_ws = ws + sum_bytes + acc_bytes;
  if (acc_bytes > 0) {
    // The accumulator is summed into with atomics: start from zero.
    const cudaError_t err = cudaMemsetAsync(dq_accum, 0, acc_bytes, stream);
    if (err != cudaSuccess) {
      return Internal(std::string("cudnn attention: memset: ") + cudaGetErrorString(err));
    }
  }
  float scale = p.scale, mask = kMaskValue, one = 1.0f;
  int64_t uids[15] = {kQ,     kK,         kV,      kO,   kDO,  kStats, kDQ,     kDK,
                      kDV,    kSoftmaxSum, kScale, kNegInf, kOne, kDQAccum};
  void* ptrs[15] = {const_cast<void*>(q),    const_cast<void*>(k),   const_cast<void*>(v),
                    const_cast<void*>(out),  const_cast<void*>(dout), const_cast<float*>(lse),
                    dq,                      dk,                      dv,
                    softmax_sum,             &scale,                  &mask,
                    &one,                    dq_accum};
  return Execute(handle, *plan, uids, ptrs, acc_bytes > 0 ? 14 : 13, plan_ws, stream);
}
}  // namespace

}  // namespace hypertrain::kernels::cuda::cudnn_attention
