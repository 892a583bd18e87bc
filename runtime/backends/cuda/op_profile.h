#pragma once
// OpProfile: device time per operation class inside one forward+backward
// pass, from CUDA events recorded between the ops on the compute stream.
//
// Mark(op) charges the time since the previous mark to `op`, so the caller
// marks right AFTER enqueueing each op (Begin() opens the pass). Off by
// default: when disabled every call is a branch and nothing is recorded.
// Events between kernels serialise nothing on one stream but add about a
// microsecond each, so profiled passes run slightly slower; it is a
// measurement mode (bench --profile), not for production steps. Not usable
// while a CUDA graph is being captured.
#include <cuda_runtime.h>

#include <array>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::cuda {

enum class Op {
  kGemm,         // block projections (forward, dX and dW; bf16 or FP8)
  kAttention,    // flash attention forward / backward
  kNorm,         // RMSNorm forward / backward (incl. the final norm)
  kRope,
  kSwiGlu,
  kLmHeadLoss,   // chunked LM head GEMMs + softmax/loss + loss sum
  kEmbedding,    // lookup and deterministic backward
  kFp8Cast,      // FP8 GEMM operands: amax, scales, cast / cast-transpose
  kLora,         // PEFT adapters beside the frozen projections (GEMMs + dropout), QLoRA dequantisation
  kOther,        // waits on collectives, pool bookkeeping, copies
  kCount
};
const char* OpName(Op op);

class OpProfile {
 public:
  OpProfile() = default;
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Allocates `capacity` events; marks past it in one pass are dropped.
  Status Enable(int capacity = 4096);
  bool enabled() const { return !events_.empty(); }
  // Enabled profiles record while active (the default); a tracer keeps one
  // enabled and inactive outside its window, so passes there record nothing.
  void set_active(bool active) { active_ = active; }
  bool recording() const { return enabled() && active_; }
  // After the stream has synchronised, before Collect(): calls
  // f(op, begin_event, end_event) for every interval of the pass, in order.
  template <typename F>
  void ForEachInterval(F&& f) const {
    if (!recording()) return;
    for (int i = 1; i < used_; ++i) f(ops_[i], events_[i - 1], events_[i]);
  }

  void Begin(cudaStream_t stream);
  void Mark(Op op, cudaStream_t stream);
  // After the stream has synchronised: adds this pass's intervals to the
  // totals. Call once per pass.
  Status Collect();

  // Accumulated milliseconds per op over `passes()` passes.
  const std::array<double, static_cast<int>(Op::kCount)>& total_ms() const { return total_ms_; }
  int passes() const { return passes_; }
  void Reset();
  // "gemm 12.3 ms (45%), attention ..." per pass, largest first.
  std::string Summary() const;

 private:
  std::vector<cudaEvent_t> events_;
  std::vector<Op> ops_;  // ops_[i] = op charged for events_[i-1] -> events_[i]
  int used_ = 0;
  bool active_ = true;
  std::array<double, static_cast<int>(Op::kCount)> total_ms_{};
  int passes_ = 0;
};

}  // namespace hypertrain::cuda
