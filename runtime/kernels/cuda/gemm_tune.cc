#include "runtime/kernels/cuda/gemm_tune.h"

#include "runtime/kernels/cuda/bit_hash.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kTuneRuns = 5;  // timed runs per candidate

// The scratch output, its hash slot and two events; released on every path.
class TuneScratch {
 public:
  explicit TuneScratch(size_t out_bytes) : out_bytes_(out_bytes) {
    const size_t hash_off = (out_bytes + 255) & ~size_t{255};
    if (cudaMalloc(&out_, hash_off + sizeof(unsigned long long)) != cudaSuccess) {
      out_ = nullptr;
      return;
    }
    hash_ = reinterpret_cast<unsigned long long*>(static_cast<char*>(out_) + hash_off);
    if (cudaEventCreate(&start_) != cudaSuccess || cudaEventCreate(&stop_) != cudaSuccess) return;
    ok_ = true;
  }
  ~TuneScratch() {
    cudaGetLastError();  // a candidate that failed to launch must not poison later checks
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (out_) cudaFree(out_);
  }
  TuneScratch(const TuneScratch&) = delete;
  TuneScratch& operator=(const TuneScratch&) = delete;

  bool ok() const { return ok_; }
  void* out() const { return out_; }
  bool Clear(cudaStream_t s) { return cudaMemsetAsync(out_, 0, out_bytes_, s) == cudaSuccess; }
  // The output's bit hash, waited for.
  bool Hash(cudaStream_t s, unsigned long long* h) {
    return BitHash(out_, out_bytes_, hash_, s) == cudaSuccess &&
           cudaMemcpyAsync(h, hash_, sizeof(*h), cudaMemcpyDeviceToHost, s) == cudaSuccess &&
           cudaStreamSynchronize(s) == cudaSuccess;
  }
  // Microseconds per call of `run` (kTuneRuns calls), -1 on an error.
  template <typename Fn>
  double TimeUs(cudaStream_t s, const Fn& run) {
    if (cudaEventRecord(start_, s) != cudaSuccess) return -1;
    for (int r = 0; r < kTuneRuns; ++r) {
      if (run() != CUBLAS_STATUS_SUCCESS) return -1;
    }
    float ms = 0;
    if (cudaEventRecord(stop_, s) != cudaSuccess || cudaEventSynchronize(stop_) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start_, stop_) != cudaSuccess) {
      return -1;
    }
    return 1e3 * ms / kTuneRuns;
  }

 private:
  size_t out_bytes_;
  void* out_ = nullptr;
  unsigned long long* hash_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool ok_ = false;
};

}  // namespace

GemmTuneResult TuneGemm(const std::vector<cublasLtMatmulAlgo_t>& candidates, size_t out_bytes,
                        cudaStream_t stream, const GemmCandidateRun& run) {
  using Outcome = GemmTuneResult::Outcome;
  GemmTuneResult r;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone) {
    r.outcome = Outcome::kDeferred;
    return r;
  }
  if (candidates.size() < 2) return r;
  TuneScratch scratch(out_bytes);
  if (!scratch.ok()) return r;
  void* out = scratch.out();
  // The product alone against an all-zero output: equal hashes mean a zero
  // product, which every algorithm agrees on.
  unsigned long long zero = 0, product = 0;
  if (!scratch.Clear(stream) || !scratch.Hash(stream, &zero) ||
      run(candidates[0], false, out) != CUBLAS_STATUS_SUCCESS || !scratch.Hash(stream, &product)) {
    return r;
  }
  if (product == zero) {
    r.outcome = Outcome::kDeferred;
    return r;
  }
  unsigned long long ref = 0;
  if (!scratch.Clear(stream) || run(candidates[0], true, out) != CUBLAS_STATUS_SUCCESS ||
      !scratch.Hash(stream, &ref)) {
    return r;
  }
  r.heuristic_us = r.best_us = scratch.TimeUs(stream, [&] { return run(candidates[0], true, out); });
  if (r.heuristic_us <= 0) return r;
  for (size_t i = 1; i < candidates.size(); ++i) {
    unsigned long long h = 0;
    if (run(candidates[i], true, out) != CUBLAS_STATUS_SUCCESS || !scratch.Hash(stream, &h)) continue;
    if (h != ref) {
      ++r.rejected;  // different rounding: would change results
      continue;
    }
    const double us = scratch.TimeUs(stream, [&] { return run(candidates[i], true, out); });
    if (us > 0 && us < r.best_us) r.best_us = us, r.best = i;
  }
  r.outcome = Outcome::kTuned;
  return r;
}

}  // namespace hypertrain::kernels::cuda
