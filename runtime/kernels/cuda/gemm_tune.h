#pragma once
// Autotuning of one cuBLASLt product (shared by Gemm and Fp8Gemm):
//
//   best = argmin_i time(candidate_i)  over i with bits(out_i) == bits(out_0)
//
// Each candidate runs into a scratch output (same layout as C) on the real
// inputs, so C is never written; a candidate whose output bits differ from
// the heuristic's first choice (another split-K, another reduction order) is
// rejected, so tuning never changes a result and runs stay reproducible
// whatever the timings. A product that is all zero (e.g. a LoRA B at its zero
// init, a zero weight) proves nothing about rounding: the tuning is deferred
// to a later call with a real product. Inside a CUDA graph capture nothing
// runs (deferred too: no syncs or allocations there). Without memory for the
// scratch output the heuristic's choice stays.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace hypertrain::kernels::cuda {

struct GemmTuneResult {
  enum class Outcome {
    kTuned,     // `best` is the choice (0: the heuristic's stays)
    kDeferred,  // try again on a later call (capture, all-zero product)
    kFailed,    // keep the heuristic's choice for good (no memory, errors)
  };
  Outcome outcome = Outcome::kFailed;
  size_t best = 0;
  int rejected = 0;          // candidates dropped for different output bits
  double heuristic_us = -1;  // per call, candidate 0
  double best_us = -1;       // per call, the chosen one
};

// What autotuning did so far (sums over tuned shapes, one call each).
struct GemmTuneStats {
  int shapes = 0;           // shapes tuned
  int changed = 0;          // shapes where another algorithm won
  int rejected = 0;         // candidates dropped for different output bits
  int deferred = 0;         // calls whose product was all zero (or captured): tuned later
  int cached = 0;           // shapes whose choice came from the tune cache (no tuning)
  int over_budget = 0;      // shapes left at the heuristic's choice: the time budget was spent
  double tune_s = 0;        // wall time spent tuning
  double heuristic_us = 0;  // one call of each tuned shape, heuristic's algorithm
  double chosen_us = 0;     // the same with the chosen algorithm
  void Add(const GemmTuneResult& r) {
    if (r.outcome == GemmTuneResult::Outcome::kDeferred) ++deferred;
    if (r.outcome != GemmTuneResult::Outcome::kTuned) return;
    ++shapes;
    changed += r.best != 0;
    rejected += r.rejected;
    heuristic_us += r.heuristic_us;
    chosen_us += r.best_us;
  }
};

// Enqueues candidate `algo` on the tuning stream, writing `out` (the scratch
// output); `with_addend` false: beta 0 (the product alone).
using GemmCandidateRun =
    std::function<cublasStatus_t(const cublasLtMatmulAlgo_t& algo, bool with_addend, void* out)>;

// Candidates timed per run of TuneGemm.
constexpr int kGemmTuneCandidates = 12;

GemmTuneResult TuneGemm(const std::vector<cublasLtMatmulAlgo_t>& candidates, size_t out_bytes,
                        cudaStream_t stream, const GemmCandidateRun& run);

}  // namespace hypertrain::kernels::cuda
