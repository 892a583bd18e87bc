#include "runtime/parallel/fp8_wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::parallel {

using model::Fp8Format;

Fp8Wire Fp8Wire::ForUnit(const model::ParamLayout& layout, int unit, int shard_degree) {
  Fp8Wire w;
  if (unit == model::ParamLayout::kEmbeddingUnit || shard_degree < 1) return w;
  const model::UnitLayout& u = layout.unit(unit);
  w.shard_degree_ = shard_degree;
  w.shard_ = u.padded_numel / shard_degree;
  int64_t fp8 = 0;
  for (const model::TensorSlot& t : u.tensors) {
    if (t.kind != model::TensorKind::kLinear) continue;
    w.tensors_.push_back({t.range()});
    fp8 += t.numel;
  }
  std::sort(w.tensors_.begin(), w.tensors_.end(),
            [](const Tensor& a, const Tensor& b) { return a.range.begin < b.range.begin; });
  w.side_count_ = u.padded_numel - fp8;
  return w;
}

int Fp8Wire::TensorOf(int64_t i) const {
  for (int t = 0; t < num_tensors(); ++t) {
    if (i >= tensors_[t].range.begin && i < tensors_[t].range.end) return t;
  }
  return -1;
}

std::vector<float> Fp8Wire::LocalAmax(int shard_rank, const float* shard) const {
  std::vector<float> amax(tensors_.size(), 0.0f);
  const model::Range own{shard_rank * shard_, (shard_rank + 1) * shard_};
  for (int t = 0; t < num_tensors(); ++t) {
    const model::Range r = model::Intersect(tensors_[t].range, own);
    if (r.empty()) continue;
    amax[t] = cpu::AbsMax(shard + (r.begin - own.begin), static_cast<size_t>(r.size()));
  }
  return amax;
}

std::vector<float> Fp8Wire::Scales(const std::vector<float>& amax) {
  std::vector<float> s(amax.size());
  for (size_t t = 0; t < amax.size(); ++t) {
    s[t] = model::Fp8ScaleFromAmax(amax[t], model::kFp8E4M3Max, 0, 1.0f);
  }
  return s;
}

void Fp8Wire::Encode(int shard_rank, const float* shard, const std::vector<float>& scales,
                     uint8_t* out) const {
  std::memset(out, 0, record_bytes());
  uint8_t* codes = out;
  uint8_t* side = out + shard_;
  const int64_t base = shard_rank * shard_;
  int64_t side_at = 0;
  int t = -1;
  for (int64_t i = 0; i < shard_; ++i) {
    const int64_t e = base + i;
    if (t < 0 || e < tensors_[t].range.begin || e >= tensors_[t].range.end) t = TensorOf(e);
    if (t >= 0) {
      codes[i] = cpu::Fp8Encode(shard[i] * scales[t], Fp8Format::kE4M3);
    } else {
      std::memcpy(side + side_at * sizeof(float), &shard[i], sizeof(float));
      ++side_at;
    }
  }
  std::memcpy(out + shard_ + side_count_ * sizeof(float), scales.data(), scales.size() * sizeof(float));
}

Status Fp8Wire::Decode(const uint8_t* records, float* full) const {
  const size_t rb = record_bytes();
  const size_t scale_at = shard_ + side_count_ * sizeof(float);
  std::vector<float> scales(tensors_.size());
  std::memcpy(scales.data(), records + scale_at, scales.size() * sizeof(float));
  for (int r = 1; r < shard_degree_; ++r) {
    if (std::memcmp(records + r * rb + scale_at, scales.data(), scales.size() * sizeof(float)) != 0) {
      return DataLoss("fp8 all-gather: shard rank " + std::to_string(r) +
                      " cast with other scales than rank 0 (the amax all-reduce did not agree)");
    }
  }
  std::vector<float> inv(scales.size());
  for (size_t t = 0; t < scales.size(); ++t) inv[t] = 1.0f / scales[t];
  for (int r = 0; r < shard_degree_; ++r) {
    const uint8_t* codes = records + r * rb;
    const uint8_t* side = codes + shard_;
    const int64_t base = r * shard_;
    int64_t side_at = 0;
    int t = -1;
    for (int64_t i = 0; i < shard_; ++i) {
      const int64_t e = base + i;
      if (t < 0 || e < tensors_[t].range.begin || e >= tensors_[t].range.end) t = TensorOf(e);
      if (t >= 0) {
        full[e] = cpu::Fp8Decode(codes[i], Fp8Format::kE4M3) * inv[t];
      } else {
        std::memcpy(&full[e], side + side_at * sizeof(float), sizeof(float));
        ++side_at;
      }
    }
  }
  return Status::Ok();
}

}  // namespace hypertrain::parallel
