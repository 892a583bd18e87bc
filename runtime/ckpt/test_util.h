#pragma once
// Test helpers: a small two-layer-like unit layout and deterministic state
// values that depend only on (tensor name, element, state), so any layout that
// holds the same tensors can be compared after a reshard.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/ckpt/format.h"
#include "runtime/ckpt/store.h"

namespace hypertrain::ckpt::testing {

// Units: "embedding" {embed [V,C], norm [C]}, then `layers` blocks
// {ln [C], w [C,C]}; tensors aligned to `align`, units padded to `pad`.
inline ModelLayoutDesc MakeLayout(int layers, int64_t align, int64_t pad, int64_t C = 6, int64_t V = 10) {
  ModelLayoutDesc d;
  auto add_unit = [&](const std::string& name, std::vector<std::pair<std::string, std::vector<int64_t>>> ts) {
    UnitEntry u;
    u.index = static_cast<int>(d.units.size());
    u.name = name;
    int64_t at = 0;
    for (auto& [tn, shape] : ts) {
      at = (at + align - 1) / align * align;
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      u.tensors.push_back({tn, shape, at, n});
      at += n;
    }
    u.padded_numel = (at + pad - 1) / pad * pad;
    d.units.push_back(u);
  };
  add_unit("embedding", {{"model.embed_tokens.weight", {V, C}}, {"model.norm.weight", {C}}});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    add_unit("layers." + std::to_string(l), {{p + ".input_layernorm.weight", {C}}, {p + ".self_attn.q_proj.weight", {C, C}}});
  }
  return d;
}

inline float ValueOf(const std::string& tensor, int64_t i, int state, int64_t salt = 0) {
  uint64_t h = std::hash<std::string>{}(tensor) ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(state + 1) << 56) ^ static_cast<uint64_t>(salt) * 0x2545F4914F6CDD1Dull;
  h ^= h >> 29;
  return static_cast<float>(h % 100000) / 1000.0f - 50.0f;
}

// Expected values of unit u's element range r in layout d (0 in gaps/padding).
inline std::vector<float> Expected(const ModelLayoutDesc& d, int u, ElemRange r, int state, int64_t salt = 0) {
  std::vector<float> out(r.size(), 0.0f);
  for (const TensorEntry& t : d.units[u].tensors) {
    for (int64_t i = std::max(r.begin, t.offset); i < std::min(r.end, t.offset + t.numel); ++i) {
      out[i - r.begin] = ValueOf(t.name, i - t.offset, state, salt);
    }
  }
  return out;
}

// A rank's shard in memory, filled with Expected() values.
struct OwnedShard {
  std::vector<ElemRange> ranges;
  std::vector<std::array<std::vector<float>, kNumStates>> values;
  ShardData View() const {
    ShardData v;
    v.ranges = ranges;
    for (const auto& a : values) v.states.push_back({a[0].data(), a[1].data(), a[2].data()});
    return v;
  }
};

inline OwnedShard MakeShard(const ModelLayoutDesc& d, int shard, int shards, int64_t salt = 0) {
  OwnedShard s;
  for (size_t u = 0; u < d.units.size(); ++u) {
    const ElemRange r = EvenShard(d.units[u].padded_numel, shard, shards);
    s.ranges.push_back(r);
    std::array<std::vector<float>, kNumStates> a;
    for (int k = 0; k < kNumStates; ++k) a[k] = Expected(d, static_cast<int>(u), r, k, salt);
    s.values.push_back(std::move(a));
  }
  return s;
}

// Saves a full checkpoint as `world` would (every rank in this process).
inline Status SaveAll(const std::string& root, const ModelLayoutDesc& d, const WorldLayout& world, int64_t step,
                      int64_t salt = 0) {
  for (int r = 0; r < world.world_size; ++r) {
    SaveTarget t;
    t.root = root;
    t.step = step;
    t.rank = r;
    t.world_size = world.world_size;
    t.shard_rank = r % world.shard_degree;
    t.shard_degree = world.shard_degree;
    t.writes_shard = r < world.shard_degree;  // replica 0
    OwnedShard s = MakeShard(d, t.shard_rank, world.shard_degree, salt);
    ShardData v = s.View();
    RankRecord rec{r, {{"position", step * 100 + r}}, {{"seed", r}}};
    HT_RETURN_IF_ERROR(WriteRankFiles(t, &v, rec));
  }
  SaveTarget t0;
  t0.root = root;
  t0.step = step;
  t0.world_size = world.world_size;
  t0.shard_degree = world.shard_degree;
  t0.coordinator_timeout_s = 5;
  Manifest m;
  m.world = world;
  m.layout = d;
  m.tokens_seen = step * 1000;
  m.config_hash = "test";
  m.trainer_state = {{"lr", 0.5}};
  HT_ASSIGN_OR_RETURN(std::string dir, CommitCheckpoint(t0, m));
  (void)dir;
  return Status::Ok();
}

}  // namespace hypertrain::ckpt::testing
