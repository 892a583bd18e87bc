#pragma once
// FP8 all-gather of a block unit's parameters (HSDP with model.fp8): each
// shard rank sends its owned range with the projection weights (q, k, v, o,
// gate, up, down) as e4m3 bytes and everything else (norm weights, gaps,
// padding) unchanged, so a gather moves ~1 byte per parameter instead of 2
// (bf16) or 4 (fp32).
//
// Scales agree across shards: one per projection tensor, from the tensor's
// amax over ALL shards (each rank's LocalAmax, then a max all-reduce in the
// shard group), as a power of two (runtime/numerics/fp8_scale.h). A value
// therefore decodes to the same number whichever rank sent it, and the
// gathered weight is exactly what one process would get casting the whole
// tensor (tested against that).
//
// Wire record of one rank (the same size on every rank, so one all-gather
// of bytes carries it):
//   [S bytes]      e4m3 code of each owned element (0 for non-FP8 elements)
//   [side bytes]   the owned non-FP8 elements in order, elem_size bytes each,
//                  zero-filled up to the unit's total non-FP8 count
//   [4 T bytes]    the T projection scales this rank used (checked equal on decode)
// Host memory, fp32 elements (the CPU backend's compute copy); device groups
// still gather in the compute dtype.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runtime/model/layout.h"

namespace hypertrain::parallel {

class Fp8Wire {
 public:
  // FP8 travel only for block units (the embedding unit returns an empty plan).
  static Fp8Wire ForUnit(const model::ParamLayout& layout, int unit, int shard_degree);

  bool empty() const { return tensors_.empty(); }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  // Bytes of one rank's record.
  size_t record_bytes() const { return shard_ + side_count_ * sizeof(float) + tensors_.size() * sizeof(float); }
  int64_t shard_elems() const { return shard_; }

  // Per projection tensor, max |x| over this rank's owned elements of it
  // (`shard` = the owned range, fp32).
  std::vector<float> LocalAmax(int shard_rank, const float* shard) const;
  // scales[t] for the agreed amaxes (e4m3, power of two).
  static std::vector<float> Scales(const std::vector<float>& amax);
  // This rank's record into `out` (record_bytes()).
  void Encode(int shard_rank, const float* shard, const std::vector<float>& scales, uint8_t* out) const;
  // All shard_degree records (rank order) into the full unit (padded_numel
  // fp32). DataLoss when the ranks' scales differ.
  Status Decode(const uint8_t* records, float* full) const;

 private:
  struct Tensor {
    model::Range range;
  };
  // Tensor index of element i (unit coordinates), or -1.
  int TensorOf(int64_t i) const;

  std::vector<Tensor> tensors_;  // in offset order
  int shard_degree_ = 1;
  int64_t shard_ = 0;        // elements per shard
  int64_t side_count_ = 0;   // non-FP8 elements in the whole unit
};

}  // namespace hypertrain::parallel
