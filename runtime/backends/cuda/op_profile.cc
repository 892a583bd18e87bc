#include "runtime/backends/cuda/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace hypertrain::cuda {

const char* OpName(Op op) {
  switch (op) {
    case Op::kGemm: return "gemm";
    case Op::kAttention: return "attention";
    case Op::kNorm: return "rmsnorm";
    case Op::kRope: return "rope";
    case Op::kSwiGlu: return "swiglu";
    case Op::kLmHeadLoss: return "lm_head+loss";
    case Op::kEmbedding: return "embedding";
    case Op::kFp8Cast: return "fp8_cast";
    case Op::kLora: return "lora";
    case Op::kOther: return "other";
    case Op::kCount: break;
  }
  return "?";
}

OpProfile::~OpProfile() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

Status OpProfile::Enable(int capacity) {
  if (enabled()) return Status::Ok();
  if (capacity < 2) return InvalidArgument("op profile needs at least 2 events");
  events_.resize(capacity, nullptr);
  ops_.resize(capacity, Op::kOther);
  for (auto& e : events_) {
    const cudaError_t err = cudaEventCreate(&e);
    if (err != cudaSuccess) {
      return Internal(std::string("cudaEventCreate (op profile): ") + cudaGetErrorString(err));
    }
  }
  return Status::Ok();
}

void OpProfile::Begin(cudaStream_t stream) {
  if (!recording()) return;
  used_ = 0;
  cudaEventRecord(events_[used_++], stream);
}

void OpProfile::Mark(Op op, cudaStream_t stream) {
  if (!recording() || used_ == 0 || used_ >= static_cast<int>(events_.size())) return;
  ops_[used_] = op;
  cudaEventRecord(events_[used_++], stream);
}

Status OpProfile::Collect() {
  if (!recording() || used_ < 2) return Status::Ok();
  for (int i = 1; i < used_; ++i) {
    float ms = 0;
    const cudaError_t err = cudaEventElapsedTime(&ms, events_[i - 1], events_[i]);
    if (err != cudaSuccess) {
      return Internal(std::string("cudaEventElapsedTime (op profile): ") + cudaGetErrorString(err));
    }
    total_ms_[static_cast<int>(ops_[i])] += ms;
  }
  ++passes_;
  used_ = 0;
  return Status::Ok();
}

void OpProfile::Reset() {
  total_ms_.fill(0.0);
  passes_ = 0;
}

std::string OpProfile::Summary() const {
  if (passes_ == 0) return "no profiled passes";
  const double sum = std::accumulate(total_ms_.begin(), total_ms_.end(), 0.0) / passes_;
  std::vector<int> order(total_ms_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return total_ms_[a] > total_ms_[b]; });
  std::string out;
  char buf[96];
  for (int i : order) {
    const double ms = total_ms_[i] / passes_;
    if (ms <= 0) continue;
    std::snprintf(buf, sizeof(buf), "%s%s %.2f ms (%.1f%%)", out.empty() ? "" : ", ",
                  OpName(static_cast<Op>(i)), ms, sum > 0 ? 100 * ms / sum : 0.0);
    out += buf;
  }
  std::snprintf(buf, sizeof(buf), " | pass %.2f ms", sum);
  return out + buf;
}

}  // namespace hypertrain::cuda
