#pragma once
// Seeded, resumable, rank-aware sampler over a token stream.
//
// The stream (all shards concatenated in file-name order) is cut into
// samples of seq+1 tokens starting every seq tokens; sample k gives inputs
// tokens[k*seq, k*seq+seq) and targets shifted by one. Each epoch visits the
// samples in a permutation seeded by (seed, epoch). Every optimizer step
// consumes global_batch = dp_world * grad_accum * micro_batch consecutive
// permuted samples; rank r's micro-batch m takes those at
// (r * grad_accum + m) * micro_batch, so the global batch - and thus the
// gradient - is the same for any split between ranks and accumulation.
// A step that runs past the epoch's end continues into the next epoch.
// State (seed, epoch, position) is all there is: the permutation is
// recomputed from it, so resuming reproduces the order exactly.
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::data {

struct SamplerState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t position = 0;  // next sample index within the epoch's permutation
  std::string ToJson() const;
  static StatusOr<SamplerState> FromJson(const std::string& json);
  bool operator==(const SamplerState&) const = default;
};

class Sampler {
 public:
  // num_samples > 0; micro_batch, grad_accum >= 1; 0 <= rank < dp_world.
  // shuffle = false visits samples in order (synthetic data: no permutation
  // is materialised).
  Sampler(int64_t num_samples, int64_t micro_batch, int64_t grad_accum, int rank, int dp_world,
          SamplerState state, bool shuffle = true);
  // Sample ids of this rank's next micro-batch (micro_batch of them); after the
  // last micro-batch of a step, the state moves past the whole global batch.
  std::vector<int64_t> NextMicroBatch();
  // State at a step boundary (what a checkpoint saves).
  const SamplerState& state() const { return state_; }
  int64_t num_samples() const { return num_samples_; }

 private:
  int64_t GlobalSample(int64_t offset_in_step);
  void EnsurePermutation(int64_t epoch);

  int64_t num_samples_, micro_batch_, grad_accum_;
  int rank_, dp_world_;
  bool shuffle_;
  SamplerState state_;
  int micro_in_step_ = 0;
  int64_t perm_epoch_ = -1;
  std::vector<int64_t> perm_;
  int64_t next_perm_epoch_ = -1;
  std::vector<int64_t> next_perm_;
};

// The permutation of [0, n) for (seed, epoch): Fisher-Yates with SplitMix64,
// identical on every platform.
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace hypertrain::data
