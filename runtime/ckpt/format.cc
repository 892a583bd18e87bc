#include "runtime/ckpt/format.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/crc32c.h"

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;

int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// Typed field access that reports which field is wrong instead of throwing.
template <typename T>
Status Get(const json& j, const char* key, T* out, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return DataLoss(where + ": missing field '" + key + "'");
  try {
    *out = j.at(key).get<T>();
  } catch (const std::exception& e) {
    return DataLoss(where + ": field '" + key + "' has the wrong type: " + e.what());
  }
  return Status::Ok();
}

json RangeToJson(const ElemRange& r) { return json::array({r.begin, r.end}); }

Status RangeFromJson(const json& j, ElemRange* r, const std::string& where) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer()) {
    return DataLoss(where + ": a range must be [begin, end]");
  }
  r->begin = j[0].get<int64_t>();
  r->end = j[1].get<int64_t>();
  if (r->begin < 0 || r->end < r->begin) return DataLoss(where + ": bad range");
  return Status::Ok();
}

}  // namespace

ElemRange IntersectRanges(const ElemRange& a, const ElemRange& b) {
  ElemRange r{std::max(a.begin, b.begin), std::min(a.end, b.end)};
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

ElemRange EvenShard(int64_t n, int part, int parts) {
  const int64_t chunk = (n + parts - 1) / parts;
  const int64_t b = std::min<int64_t>(part * chunk, n);
  return {b, std::min<int64_t>(b + chunk, n)};
}

Status ModelLayoutDesc::Validate() const {
  if (units.empty()) return InvalidArgument("model layout has no units");
  for (size_t u = 0; u < units.size(); ++u) {
    const UnitEntry& e = units[u];
    if (e.index != static_cast<int>(u)) return InvalidArgument("unit " + e.name + " out of order");
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (const TensorEntry& t : e.tensors) {
      int64_t prod = 1;
      for (int64_t d : t.shape) prod *= d;
      if (prod != t.numel) return InvalidArgument("tensor " + t.name + ": numel != product of shape");
      if (t.offset < 0 || t.offset + t.numel > e.padded_numel) {
        return InvalidArgument("tensor " + t.name + " lies outside unit " + e.name);
      }
      spans.push_back({t.offset, t.offset + t.numel});
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first < spans[i - 1].second) return InvalidArgument("overlapping tensors in unit " + e.name);
    }
  }
  return Status::Ok();
}

Status WorldLayout::Validate() const {
  if (nnodes < 1 || world_size < 1 || shard_degree < 1 || replica_degree < 1) {
    return InvalidArgument("world layout values must be >= 1");
  }
  if (shard_degree * replica_degree != world_size) {
    return InvalidArgument("world layout: shard_degree (" + std::to_string(shard_degree) + ") x replica_degree (" +
                           std::to_string(replica_degree) + ") != world_size (" + std::to_string(world_size) + ")");
  }
  return Status::Ok();
}

std::string ShardFileName(int shard_rank, int shard_degree) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05d-of-%05d.bin", shard_rank, shard_degree);
  return buf;
}

json Manifest::ToJson() const {
  json j;
  j["format"] = "hypertrain-checkpoint";
  j["version"] = version;
  j["step"] = step;
  j["tokens_seen"] = tokens_seen;
  j["config_hash"] = config_hash;
  j["created_utc"] = created_utc;
  j["model_config"] = model_config;
  j["trainer_state"] = trainer_state;
  j["world"] = {{"nnodes", world.nnodes},
                {"world_size", world.world_size},
                {"shard_degree", world.shard_degree},
                {"replica_degree", world.replica_degree},
                {"strategy", world.strategy}};
  json units = json::array();
  for (const UnitEntry& u : layout.units) {
    json ts = json::array();
    for (const TensorEntry& t : u.tensors) {
      ts.push_back({{"name", t.name}, {"shape", t.shape}, {"offset", t.offset}, {"numel", t.numel}});
    }
    units.push_back({{"index", u.index}, {"name", u.name}, {"padded_numel", u.padded_numel}, {"tensors", ts}});
  }
  j["layout"] = {{"units", units}};
  json ranks_j = json::array();
  for (const RankRecord& r : ranks) ranks_j.push_back({{"rank", r.rank}, {"sampler", r.sampler}, {"rng", r.rng}});
  j["ranks"] = ranks_j;
  json files_j = json::array();
  for (const ShardFileRecord& f : files) {
    json rs = json::array();
    for (const ElemRange& r : f.ranges) rs.push_back(RangeToJson(r));
    files_j.push_back({{"name", f.name},
                       {"shard_rank", f.shard_rank},
                       {"bytes", f.bytes},
                       {"crc32c", Crc32cHex(f.crc32c)},
                       {"ranges", rs}});
  }
  j["files"] = files_j;
  // Last: a checksum of everything above, so an edited or bit-flipped
  // manifest (tokens_seen, adam_step, a sampler position) is corruption.
  j[kManifestChecksumKey] = Crc32cHex(ManifestContentCrc32c(j));
  return j;
}

uint32_t ManifestContentCrc32c(const json& manifest) {
  json content = manifest;
  content.erase(kManifestChecksumKey);
  const std::string text = content.dump();  // keys sorted: one canonical text
  return Crc32c(text.data(), text.size());
}

StatusOr<Manifest> Manifest::FromJson(const json& j) {
  Manifest m;
  const std::string w = "manifest";
  std::string format;
  HT_RETURN_IF_ERROR(Get(j, "format", &format, w));
  if (format != "hypertrain-checkpoint") return DataLoss("manifest: format is '" + format + "'");
  HT_RETURN_IF_ERROR(Get(j, "version", &m.version, w));
  if (m.version != kFormatVersion) {
    return DataLoss("manifest: version " + std::to_string(m.version) + " is not supported (want " +
                    std::to_string(kFormatVersion) + ")");
  }
  HT_RETURN_IF_ERROR(Get(j, "step", &m.step, w));
  HT_RETURN_IF_ERROR(Get(j, "tokens_seen", &m.tokens_seen, w));
  HT_RETURN_IF_ERROR(Get(j, "config_hash", &m.config_hash, w));
  HT_RETURN_IF_ERROR(Get(j, "created_utc", &m.created_utc, w));
  HT_RETURN_IF_ERROR(Get(j, "model_config", &m.model_config, w));
  HT_RETURN_IF_ERROR(Get(j, "trainer_state", &m.trainer_state, w));
  json world, layout, ranks, files;
  HT_RETURN_IF_ERROR(Get(j, "world", &world, w));
  HT_RETURN_IF_ERROR(Get(world, "nnodes", &m.world.nnodes, "manifest.world"));
  HT_RETURN_IF_ERROR(Get(world, "world_size", &m.world.world_size, "manifest.world"));
  HT_RETURN_IF_ERROR(Get(world, "shard_degree", &m.world.shard_degree, "manifest.world"));
  HT_RETURN_IF_ERROR(Get(world, "replica_degree", &m.world.replica_degree, "manifest.world"));
  HT_RETURN_IF_ERROR(Get(world, "strategy", &m.world.strategy, "manifest.world"));
  HT_RETURN_IF_ERROR(Get(j, "layout", &layout, w));
  json units;
  HT_RETURN_IF_ERROR(Get(layout, "units", &units, "manifest.layout"));
  if (!units.is_array()) return DataLoss("manifest.layout.units is not an array");
  for (const json& uj : units) {
    UnitEntry u;
    const std::string uw = "manifest.layout.units[" + std::to_string(m.layout.units.size()) + "]";
    HT_RETURN_IF_ERROR(Get(uj, "index", &u.index, uw));
    HT_RETURN_IF_ERROR(Get(uj, "name", &u.name, uw));
    HT_RETURN_IF_ERROR(Get(uj, "padded_numel", &u.padded_numel, uw));
    json ts;
    HT_RETURN_IF_ERROR(Get(uj, "tensors", &ts, uw));
    if (!ts.is_array()) return DataLoss(uw + ".tensors is not an array");
    for (const json& tj : ts) {
      TensorEntry t;
      HT_RETURN_IF_ERROR(Get(tj, "name", &t.name, uw + ".tensors"));
      HT_RETURN_IF_ERROR(Get(tj, "shape", &t.shape, uw + ".tensors"));
      HT_RETURN_IF_ERROR(Get(tj, "offset", &t.offset, uw + ".tensors"));
      HT_RETURN_IF_ERROR(Get(tj, "numel", &t.numel, uw + ".tensors"));
      u.tensors.push_back(std::move(t));
    }
    m.layout.units.push_back(std::move(u));
  }
  HT_RETURN_IF_ERROR(Get(j, "ranks", &ranks, w));
  if (!ranks.is_array()) return DataLoss("manifest.ranks is not an array");
  for (const json& rj : ranks) {
    RankRecord r;
    HT_RETURN_IF_ERROR(Get(rj, "rank", &r.rank, "manifest.ranks"));
    if (rj.contains("sampler")) r.sampler = rj["sampler"];
    if (rj.contains("rng")) r.rng = rj["rng"];
    m.ranks.push_back(std::move(r));
  }
  HT_RETURN_IF_ERROR(Get(j, "files", &files, w));
  if (!files.is_array()) return DataLoss("manifest.files is not an array");
  for (const json& fj : files) {
    ShardFileRecord f;
    const std::string fw = "manifest.files[" + std::to_string(m.files.size()) + "]";
    HT_RETURN_IF_ERROR(Get(fj, "name", &f.name, fw));
    HT_RETURN_IF_ERROR(Get(fj, "shard_rank", &f.shard_rank, fw));
    HT_RETURN_IF_ERROR(Get(fj, "bytes", &f.bytes, fw));
    std::string crc;
    HT_RETURN_IF_ERROR(Get(fj, "crc32c", &crc, fw));
    char* end = nullptr;
    f.crc32c = static_cast<uint32_t>(std::strtoul(crc.c_str(), &end, 16));
    if (crc.size() != 8 || end != crc.c_str() + 8) return DataLoss(fw + ".crc32c is not 8 hex digits");
    json rs;
    HT_RETURN_IF_ERROR(Get(fj, "ranges", &rs, fw));
    if (!rs.is_array()) return DataLoss(fw + ".ranges is not an array");
    for (const json& rj : rs) {
      ElemRange r;
      HT_RETURN_IF_ERROR(RangeFromJson(rj, &r, fw + ".ranges"));
      f.ranges.push_back(r);
    }
    m.files.push_back(std::move(f));
  }
  HT_RETURN_IF_ERROR(m.Validate());
  return m;
}

StatusOr<Manifest> Manifest::Parse(const std::string& text, bool allow_missing_checksum) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss("manifest.json is not valid JSON (truncated?)");
  if (!j.is_object() || !j.contains(kManifestChecksumKey)) {
    // A removed checksum hides an edit: refused unless the run opts out of
    // checksums (docs/CHECKPOINTS.md), as for checkpoints older than it.
    if (!allow_missing_checksum) {
      return DataLoss(std::string("manifest.json has no ") + kManifestChecksumKey +
                      " (removed, or written before it existed): its content cannot be checked; set "
                      "exp_manager.checkpoint.verify_checksums: false to load it anyway");
    }
    static bool warned = false;
    if (!warned) spdlog::warn("manifest.json without {} loaded unchecked (exp_manager.checkpoint.verify_checksums: false)",
                              kManifestChecksumKey);
    warned = true;
  } else {
    const json& want = j[kManifestChecksumKey];
    const std::string have = Crc32cHex(ManifestContentCrc32c(j));
    if (!want.is_string() || want.get<std::string>() != have) {
      return DataLoss("manifest.json: content crc32c " + have + " != recorded " +
                      (want.is_string() ? want.get<std::string>() : want.dump()) + " (edited or corrupt)");
    }
  }
  return FromJson(j);
}

Status Manifest::Validate() const {
  Status s = world.Validate();
  if (!s.ok()) return DataLoss("manifest: " + s.message());
  s = layout.Validate();
  if (!s.ok()) return DataLoss("manifest: " + s.message());
  if (static_cast<int>(ranks.size()) != world.world_size) {
    return DataLoss("manifest: " + std::to_string(ranks.size()) + " rank records for world size " +
                    std::to_string(world.world_size));
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank != static_cast<int>(i)) return DataLoss("manifest: rank records out of order");
  }
  if (static_cast<int>(files.size()) != world.shard_degree) {
    return DataLoss("manifest: " + std::to_string(files.size()) + " shard files for shard degree " +
                    std::to_string(world.shard_degree));
  }
  const size_t nu = layout.units.size();
  for (size_t i = 0; i < files.size(); ++i) {
    const ShardFileRecord& f = files[i];
    if (f.shard_rank != static_cast<int>(i)) return DataLoss("manifest: shard files out of order");
    if (f.name != ShardFileName(f.shard_rank, world.shard_degree) ) {
      return DataLoss("manifest: unexpected shard file name " + f.name);
    }
    if (f.ranges.size() != nu) return DataLoss("manifest: " + f.name + " has a range count != unit count");
  }
  // The shards' ranges must tile [0, padded_numel) of every unit.
  for (size_t u = 0; u < nu; ++u) {
    std::vector<ElemRange> rs;
    for (const ShardFileRecord& f : files) {
      if (f.ranges[u].size() > 0) rs.push_back(f.ranges[u]);
    }
    std::sort(rs.begin(), rs.end(), [](const ElemRange& a, const ElemRange& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const ElemRange& r : rs) {
      if (r.begin != at) break;
      at = r.end;
    }
    if (at != layout.units[u].padded_numel) {
      return DataLoss("manifest: shard ranges do not cover unit " + layout.units[u].name + " exactly once");
    }
  }
  return Status::Ok();
}

const RankRecord* Manifest::FindRank(int rank) const {
  for (const RankRecord& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

int64_t ShardHeader::ExpectedFileBytes() const {
  int64_t end = 0;
  for (const Unit& u : units) {
    end = std::max(end, u.data_offset + kNumStates * u.range.size() * static_cast<int64_t>(sizeof(float)));
  }
  return end;
}

namespace {

json HeaderJson(const ShardHeader& h) {
  json units = json::array();
  for (const ShardHeader::Unit& u : h.units) {
    units.push_back({{"unit", u.unit}, {"range", RangeToJson(u.range)}, {"data_offset", u.data_offset}});
  }
  return {{"version", h.version},
          {"step", h.step},
          {"shard_rank", h.shard_rank},
          {"shard_degree", h.shard_degree},
          {"dtype", "F32"},
          {"states", {kStateNames[0], kStateNames[1], kStateNames[2]}},
          {"units", units}};
}

}  // namespace

ShardHeader MakeShardHeader(int64_t step, int shard_rank, int shard_degree, const std::vector<ElemRange>& ranges) {
  ShardHeader h;
  h.step = step;
  h.shard_rank = shard_rank;
  h.shard_degree = shard_degree;
  for (size_t u = 0; u < ranges.size(); ++u) h.units.push_back({static_cast<int>(u), ranges[u], 0});
  // The header's own size depends on the offsets' digits: iterate to a fixed
  // point (offsets only grow, so this ends after a couple of rounds).
  int64_t header_bytes = 0;
  while (true) {
    int64_t at = header_bytes;
    for (ShardHeader::Unit& u : h.units) {
      u.data_offset = at;
      at = AlignUp(at + kNumStates * u.range.size() * static_cast<int64_t>(sizeof(float)), kDataAlignment);
    }
    const int64_t need = static_cast<int64_t>(SerializeShardHeader(h).size());
    if (need <= header_bytes) break;
    header_bytes = need;
  }
  return h;
}

std::string SerializeShardHeader(const ShardHeader& h) {
  const std::string body = HeaderJson(h).dump();
  std::string out(kShardMagic, 8);
  const uint64_t len = body.size();
  char lenb[8];
  for (int i = 0; i < 8; ++i) lenb[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  out.append(lenb, 8);
  out += body;
  out.resize(AlignUp(static_cast<int64_t>(out.size()), kDataAlignment), '\0');
  return out;
}

StatusOr<ShardHeader> ReadShardHeader(int fd, const std::string& path) {
  char pre[16];
  HT_RETURN_IF_ERROR(PreadExact(fd, pre, 16, 0, path));
  if (std::memcmp(pre, kShardMagic, 8) != 0) return DataLoss(path + ": not a hypertrain shard file (bad magic)");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<uint8_t>(pre[8 + i])) << (8 * i);
  if (len > (64u << 20)) return DataLoss(path + ": header length " + std::to_string(len) + " is implausible");
  std::string body(len, '\0');
  HT_RETURN_IF_ERROR(PreadExact(fd, body.data(), len, 16, path));
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return DataLoss(path + ": header is not valid JSON");
  ShardHeader h;
  HT_RETURN_IF_ERROR(Get(j, "version", &h.version, path));
  HT_RETURN_IF_ERROR(Get(j, "step", &h.step, path));
  HT_RETURN_IF_ERROR(Get(j, "shard_rank", &h.shard_rank, path));
  HT_RETURN_IF_ERROR(Get(j, "shard_degree", &h.shard_degree, path));
  json units;
  HT_RETURN_IF_ERROR(Get(j, "units", &units, path));
  if (!units.is_array()) return DataLoss(path + ": header units is not an array");
  const int64_t data_start = AlignUp(16 + static_cast<int64_t>(len), kDataAlignment);
  for (const json& uj : units) {
    ShardHeader::Unit u;
    HT_RETURN_IF_ERROR(Get(uj, "unit", &u.unit, path));
    HT_RETURN_IF_ERROR(RangeFromJson(uj.value("range", json()), &u.range, path));
    HT_RETURN_IF_ERROR(Get(uj, "data_offset", &u.data_offset, path));
    if (u.data_offset < data_start || u.data_offset % kDataAlignment != 0) {
      return DataLoss(path + ": bad data_offset for unit " + std::to_string(u.unit));
    }
    h.units.push_back(u);
  }
  return h;
}

}  // namespace hypertrain::ckpt
