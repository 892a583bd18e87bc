#include "runtime/ckpt/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/time.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string RankFileName(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "rank-%05d.json", rank);
  return buf;
}

Status WriteShardFile(const std::string& path, int64_t step, int shard_rank, int shard_degree,
                      const ShardData& shard, ShardFileRecord* rec) {
  if (shard.states.size() != shard.ranges.size()) return InvalidArgument("shard data: states/ranges size mismatch");
  const ShardHeader h = MakeShardHeader(step, shard_rank, shard_degree, shard.ranges);
  HT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open(path));
  const std::string head = SerializeShardHeader(h);
  HT_RETURN_IF_ERROR(w.Append(head));
  static const char kZeros[kDataAlignment] = {};
  for (size_t u = 0; u < h.units.size(); ++u) {
    if (w.bytes_written() != h.units[u].data_offset) {
      const int64_t pad = h.units[u].data_offset - w.bytes_written();
      if (pad < 0 || pad >= kDataAlignment) return Internal("shard layout mismatch writing " + path);
      HT_RETURN_IF_ERROR(w.Append(kZeros, static_cast<size_t>(pad)));
    }
    const size_t bytes = static_cast<size_t>(shard.ranges[u].size()) * sizeof(float);
    for (int s = 0; s < kNumStates; ++s) {
      if (bytes > 0 && shard.states[u][s] == nullptr) return InvalidArgument("shard data: null state buffer");
      // Chunked so a huge unit does not become one giant write(2).
      const char* p = reinterpret_cast<const char*>(shard.states[u][s]);
      for (size_t done = 0; done < bytes;) {
        const size_t n = std::min<size_t>(bytes - done, 64u << 20);
        HT_RETURN_IF_ERROR(w.Append(p + done, n));
        done += n;
      }
    }
  }
  rec->bytes = w.bytes_written();
  rec->crc32c = w.crc32c();
  if (rec->bytes != h.ExpectedFileBytes()) return Internal("shard size mismatch writing " + path);
  return w.Commit();
}

}  // namespace

std::string StepDirName(int64_t step) { return "step-" + std::to_string(step); }
std::string TempDirName(int64_t step, const std::string& attempt) {
  return ".step-" + std::to_string(step) + ".tmp-" + attempt;
}

Status WriteRankFiles(const SaveTarget& t, const ShardData* shard, const RankRecord& record, WriteStats* stats) {
  const auto t0 = Clock::now();
  const std::string dir = t.root + "/" + TempDirName(t.step, t.attempt);
  HT_RETURN_IF_ERROR(MakeDirs(dir));
  json side = {{"rank", record.rank}, {"sampler", record.sampler}, {"rng", record.rng}, {"step", t.step}};
  int64_t bytes = 0;
  if (t.writes_shard) {
    if (shard == nullptr) return InvalidArgument("rank " + std::to_string(t.rank) + " writes a shard but has no data");
    ShardFileRecord rec;
    rec.name = ShardFileName(t.shard_rank, t.shard_degree);
    rec.shard_rank = t.shard_rank;
    rec.ranges = shard->ranges;
    HT_RETURN_IF_ERROR(WriteShardFile(dir + "/" + rec.name, t.step, t.shard_rank, t.shard_degree, *shard, &rec));
    bytes += rec.bytes;
    json rs = json::array();
    for (const ElemRange& r : rec.ranges) rs.push_back({r.begin, r.end});
    side["shard"] = {{"name", rec.name},
                     {"shard_rank", rec.shard_rank},
                     {"bytes", rec.bytes},
                     {"crc32c", Crc32cHex(rec.crc32c)},
                     {"ranges", rs}};
  }
  const std::string text = side.dump();
  HT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + RankFileName(t.rank), text));
  bytes += static_cast<int64_t>(text.size());
  if (stats != nullptr) {
    stats->bytes = bytes;
    stats->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return Status::Ok();
}

void ReportRankFailure(const SaveTarget& t, const Status& error) {
  const std::string dir = t.root + "/" + TempDirName(t.step, t.attempt);
  (void)WriteFileAtomically(dir + "/" + RankFileName(t.rank) + ".failed", error.ToString());
}

StatusOr<std::string> CommitCheckpoint(const SaveTarget& t, Manifest m) {
  const std::string dir = t.root + "/" + TempDirName(t.step, t.attempt);
  const std::string final_dir = t.root + "/" + StepDirName(t.step);
  // Barrier through the file system: wait for every rank's rank file.
  const auto deadline = Clock::now() + std::chrono::duration<double>(t.coordinator_timeout_s);
  auto sleep = std::chrono::milliseconds(2);
  std::vector<json> sides(t.world_size);
  int have = 0;
  while (have < t.world_size) {
    for (int r = 0; r < t.world_size; ++r) {
      if (!sides[r].is_null()) continue;
      StatusOr<std::string> text = ReadFileToString(dir + "/" + RankFileName(r));
      if (!text.ok()) {
        if (text.status().code() == StatusCode::kNotFound) {
          StatusOr<std::string> failed = ReadFileToString(dir + "/" + RankFileName(r) + ".failed");
          if (failed.ok()) {
            return Unavailable("checkpoint step " + std::to_string(t.step) + ": rank " + std::to_string(r) +
                               " failed to write its part: " + *failed);
          }
          continue;
        }
        return text.status();
      }
      json j = json::parse(*text, nullptr, false);
      if (j.is_discarded() || j.value("step", int64_t{-1}) != t.step) {
        return DataLoss(dir + "/" + RankFileName(r) + " is not a valid rank file for step " + std::to_string(t.step));
      }
      sides[r] = std::move(j);
      ++have;
    }
    if (have == t.world_size) break;
    if (t.cancel != nullptr && t.cancel->load()) {
      return Unavailable("checkpoint step " + std::to_string(t.step) + " abandoned: shutting down before all ranks finished");
    }
    if (Clock::now() > deadline) {
      std::string missing;
      for (int r = 0; r < t.world_size; ++r) {
        if (sides[r].is_null()) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
      return DeadlineExceeded("checkpoint step " + std::to_string(t.step) + ": ranks [" + missing +
                              "] did not finish writing within " + std::to_string(t.coordinator_timeout_s) + " s");
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(100));
  }
  m.step = t.step;
  m.created_utc = FormatRfc3339(std::chrono::system_clock::now());
  m.ranks.clear();
  m.files.assign(m.world.shard_degree, ShardFileRecord{});
  std::vector<bool> seen(m.world.shard_degree, false);
  for (int r = 0; r < t.world_size; ++r) {
    m.ranks.push_back({r, sides[r].value("sampler", json()), sides[r].value("rng", json())});
    if (!sides[r].contains("shard")) continue;
    const json& sj = sides[r]["shard"];
    const int sr = sj.value("shard_rank", -1);
    if (sr < 0 || sr >= m.world.shard_degree || seen[sr]) {
      return DataLoss("rank " + std::to_string(r) + " wrote an unexpected shard rank " + std::to_string(sr));
    }
    seen[sr] = true;
    ShardFileRecord& f = m.files[sr];
    f.name = sj.value("name", "");
    f.shard_rank = sr;
    f.bytes = sj.value("bytes", int64_t{0});
    f.crc32c = static_cast<uint32_t>(std::strtoul(sj.value("crc32c", "0").c_str(), nullptr, 16));
    for (const json& rj : sj.value("ranges", json::array())) f.ranges.push_back({rj[0].get<int64_t>(), rj[1].get<int64_t>()});
  }
  for (int s = 0; s < m.world.shard_degree; ++s) {
    if (!seen[s]) return DataLoss("checkpoint step " + std::to_string(t.step) + ": no rank wrote shard " + std::to_string(s));
  }
  HT_RETURN_IF_ERROR(m.Validate());
  HT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/manifest.json", m.ToJson().dump(1)));
  for (int r = 0; r < t.world_size; ++r) ::unlink((dir + "/" + RankFileName(r)).c_str());
  HT_RETURN_IF_ERROR(FsyncDir(dir));
  if (fs::exists(final_dir)) {
    // Only after an explicit resume from an older step or start_fresh, or
    // over a step-N that failed verification: it is moved aside, never
    // deleted (rename cannot replace a non-empty directory anyway).
    const bool valid = VerifyCheckpoint(final_dir, /*full_checksums=*/true).ok();
    HT_ASSIGN_OR_RETURN(std::string aside, MoveAside(final_dir, valid ? "replaced" : "corrupt"));
    spdlog::warn("{} existed ({}): moved aside to {}; delete it when it is not needed", final_dir,
                 valid ? "a checkpoint of an earlier trajectory" : "it fails verification", aside);
  }
  HT_RETURN_IF_ERROR(RenameDurably(dir, final_dir));
  return final_dir;
}

std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  static const std::regex kStep("step-([0-9]{1,18})");
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kStep) || !it->is_directory()) continue;
    out.push_back({std::stoll(m[1].str()), it->path().string()});
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<Manifest> VerifyCheckpoint(const std::string& dir, bool full_checksums) {
  return VerifyCheckpoint(dir, VerifyOptions{full_checksums, full_checksums});
}

StatusOr<Manifest> VerifyCheckpoint(const std::string& dir, const VerifyOptions& options) {
  StatusOr<std::string> text = ReadFileToString(dir + "/manifest.json");
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return NotFound("no manifest.json in " + dir);
    return text.status();
  }
  HT_ASSIGN_OR_RETURN(Manifest m, Manifest::Parse(*text, /*allow_missing_checksum=*/!options.manifest_checksum));
  for (const ShardFileRecord& f : m.files) {
    const std::string path = dir + "/" + f.name;
    StatusOr<int64_t> size = FileSize(path);
    if (!size.ok()) return DataLoss("missing shard file " + path);
    if (*size != f.bytes) {
      return DataLoss(path + " has " + std::to_string(*size) + " bytes, manifest says " + std::to_string(f.bytes) +
                      (*size < f.bytes ? " (truncated)" : ""));
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    Fd guard(fd);
    HT_ASSIGN_OR_RETURN(ShardHeader h, ReadShardHeader(fd, path));
    if (h.step != m.step || h.shard_rank != f.shard_rank || h.shard_degree != m.world.shard_degree ||
        h.units.size() != f.ranges.size() || h.ExpectedFileBytes() != f.bytes) {
      return DataLoss(path + ": header disagrees with manifest.json");
    }
    for (size_t u = 0; u < h.units.size(); ++u) {
      if (h.units[u].unit != static_cast<int>(u) || !(h.units[u].range == f.ranges[u])) {
        return DataLoss(path + ": unit ranges disagree with manifest.json");
      }
    }
    if (options.file_checksums) {
      HT_ASSIGN_OR_RETURN(uint32_t crc, FileCrc32c(path));
      if (crc != f.crc32c) {
        return DataLoss(path + ": crc32c " + Crc32cHex(crc) + " != manifest " + Crc32cHex(f.crc32c) + " (corrupt)");
      }
    }
  }
  return m;
}

StatusOr<FoundCheckpoint> FindLatestCheckpoint(const std::string& root, bool full_checksums) {
  return FindLatestCheckpoint(root, VerifyOptions{full_checksums, full_checksums});
}

StatusOr<FoundCheckpoint> FindLatestCheckpoint(const std::string& root, const VerifyOptions& options) {
  auto all = ListCheckpoints(root);
  std::vector<UnusableCheckpoint> skipped;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    StatusOr<Manifest> m = VerifyCheckpoint(it->second, options);
    if (m.ok() && m->step != it->first) {
      m = DataLoss("manifest step " + std::to_string(m->step) + " does not match the directory name");
    }
    if (m.ok()) return FoundCheckpoint{it->second, std::move(m).value(), std::move(skipped)};
    spdlog::warn("skipping checkpoint {}: {}{}", it->second, m.status().ToString(),
                 std::next(it) != all.rend() ? "; falling back to an older one" : "");
    skipped.push_back({it->second, m.status()});
  }
  if (skipped.empty()) return NotFound("no checkpoint under " + root);
  std::string list;
  for (const UnusableCheckpoint& u : skipped) list += "\n  " + u.path + ": " + u.why.ToString();
  return DataLoss(std::to_string(skipped.size()) + " checkpoint(s) under " + root +
                  " and none is usable:" + list +
                  "\nnothing was changed. Repair or restore one, resume from a specific one "
                  "(exp_manager.resume_from_checkpoint), or train from initialisation on purpose "
                  "(exp_manager.start_fresh: true; the checkpoints above are then moved aside, not "
                  "deleted, as new ones take their names)");
}

StatusOr<std::string> MoveAside(const std::string& dir, const std::string& tag) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  std::string to = dir + "." + tag + "-" + stamp;
  for (int i = 1; fs::exists(to); ++i) to = dir + "." + tag + "-" + stamp + "-" + std::to_string(i);
  HT_RETURN_IF_ERROR(RenameDurably(dir, to));
  return to;
}

Status CleanStaleTemporaries(const std::string& root) {
  std::error_code ec;
  static const std::regex kStale(R"(\.(step-[0-9]+\.tmp-.*|trash-.*|save-request-[0-9]+))");
  std::vector<std::string> doomed;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (std::regex_match(it->path().filename().string(), kStale)) doomed.push_back(it->path().string());
  }
  for (const std::string& d : doomed) {
    spdlog::info("removing unfinished checkpoint temporary {}", d);
    HT_RETURN_IF_ERROR(RemoveTree(d));
  }
  return Status::Ok();
}

Status ApplyRetention(const std::string& root, int keep, int64_t protect_step) {
  if (keep < 0) return Status::Ok();
  auto all = ListCheckpoints(root);
  const int n = static_cast<int>(all.size());
  for (int i = 0; i < n - keep; ++i) {
    if (all[i].first == protect_step) continue;
    const std::string trash = root + "/.trash-" + StepDirName(all[i].first);
    HT_RETURN_IF_ERROR(RemoveTree(trash));
    HT_RETURN_IF_ERROR(RenameDurably(all[i].second, trash));
    HT_RETURN_IF_ERROR(RemoveTree(trash));
    spdlog::info("deleted old checkpoint {} (save_top_k={})", all[i].second, keep);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- reading --

StatusOr<CheckpointReader> CheckpointReader::Open(const std::string& dir, Manifest manifest) {
  CheckpointReader r;
  r.dir_ = dir;
  r.manifest_ = std::move(manifest);
  for (const ShardFileRecord& f : r.manifest_.files) {
    const std::string path = dir + "/" + f.name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    r.fds_.emplace_back(fd);
    HT_ASSIGN_OR_RETURN(ShardHeader h, ReadShardHeader(fd, path));
    if (h.units.size() != f.ranges.size()) return DataLoss(path + ": header disagrees with manifest.json");
    r.headers_.push_back(std::move(h));
  }
  return r;
}

Status CheckpointReader::CheckCompatible(const ModelLayoutDesc& target) const {
  const auto& old_units = manifest_.layout.units;
  if (old_units.size() != target.units.size()) {
    return InvalidArgument("checkpoint has " + std::to_string(old_units.size()) + " units, the model has " +
                           std::to_string(target.units.size()) + " (different model shape?)");
  }
  for (size_t u = 0; u < old_units.size(); ++u) {
    std::map<std::string, const TensorEntry*> by_name;
    for (const TensorEntry& t : old_units[u].tensors) by_name[t.name] = &t;
    if (by_name.size() != target.units[u].tensors.size()) {
      return InvalidArgument("unit " + target.units[u].name + ": checkpoint has " + std::to_string(by_name.size()) +
                             " tensors, the model " + std::to_string(target.units[u].tensors.size()));
    }
    for (const TensorEntry& t : target.units[u].tensors) {
      auto it = by_name.find(t.name);
      if (it == by_name.end()) return InvalidArgument("checkpoint lacks tensor " + t.name);
      if (it->second->shape != t.shape) return InvalidArgument("tensor " + t.name + ": shape differs from checkpoint");
    }
  }
  return Status::Ok();
}

Status CheckpointReader::ReadOld(int unit, ElemRange r, int state, float* dst) const {
  for (size_t f = 0; f < headers_.size(); ++f) {
    const ShardHeader::Unit& hu = headers_[f].units[unit];
    const ElemRange part = IntersectRanges(r, hu.range);
    if (part.size() <= 0) continue;
    const int64_t off = hu.data_offset + (state * hu.range.size() + (part.begin - hu.range.begin)) * 4;
    HT_RETURN_IF_ERROR(PreadExact(fds_[f].get(), dst + (part.begin - r.begin), part.size() * 4, off,
                                  dir_ + "/" + manifest_.files[f].name));
  }
  return Status::Ok();
}

std::vector<ElemRange> CheckpointReader::OldRangesFor(const UnitEntry& target_unit, ElemRange range) const {
  std::vector<ElemRange> out;
  for (const TensorEntry& t : target_unit.tensors) {
    const TensorEntry* old_t = nullptr;
    for (const TensorEntry& o : manifest_.layout.units[target_unit.index].tensors) {
      if (o.name == t.name) old_t = &o;
    }
    if (old_t == nullptr || old_t->numel != t.numel) continue;  // ReadRange reports it
    const ElemRange want = IntersectRanges(range, {t.offset, t.offset + t.numel});
    if (want.size() <= 0) continue;
    out.push_back({old_t->offset + (want.begin - t.offset), old_t->offset + (want.end - t.offset)});
  }
  return out;
}

Status CheckpointReader::ReadRange(const UnitEntry& target_unit, ElemRange range,
                                   const std::array<float*, kNumStates>& dst) const {
  const int u = target_unit.index;
  if (u < 0 || u >= static_cast<int>(manifest_.layout.units.size())) return InvalidArgument("unit out of range");
  if (range.begin < 0 || range.end > target_unit.padded_numel || range.end < range.begin) {
    return InvalidArgument("range outside unit " + target_unit.name);
  }
  const UnitEntry& old_unit = manifest_.layout.units[u];
  for (int s = 0; s < kNumStates; ++s) std::fill(dst[s], dst[s] + range.size(), 0.0f);
  for (const TensorEntry& t : target_unit.tensors) {
    const TensorEntry* old_t = nullptr;
    for (const TensorEntry& o : old_unit.tensors) {
      if (o.name == t.name) old_t = &o;
    }
    if (old_t == nullptr || old_t->numel != t.numel) return InvalidArgument("checkpoint lacks tensor " + t.name);
    const ElemRange want = IntersectRanges(range, {t.offset, t.offset + t.numel});
    if (want.size() <= 0) continue;
    const ElemRange old_r{old_t->offset + (want.begin - t.offset), old_t->offset + (want.end - t.offset)};
    for (int s = 0; s < kNumStates; ++s) HT_RETURN_IF_ERROR(ReadOld(u, old_r, s, dst[s] + (want.begin - range.begin)));
  }
  return Status::Ok();
}

Status CheckpointReader::VerifyFilesFor(const ModelLayoutDesc& target, const std::function<ElemRange(int)>& owned,
                                        int64_t* bytes) const {
  std::vector<bool> reads(headers_.size(), false);
  for (const UnitEntry& unit : target.units) {
    if (unit.index < 0 || unit.index >= static_cast<int>(manifest_.layout.units.size())) continue;
    for (const ElemRange& r : OldRangesFor(unit, owned(unit.index))) {
      for (size_t f = 0; f < headers_.size(); ++f) {
        if (IntersectRanges(r, headers_[f].units[unit.index].range).size() > 0) reads[f] = true;
      }
    }
  }
  std::vector<size_t> files;
  int64_t total = 0;
  for (size_t f = 0; f < reads.size(); ++f) {
    if (!reads[f]) continue;
    files.push_back(f);
    total += manifest_.files[f].bytes;
  }
  std::vector<Status> results(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      const ShardFileRecord& rec = manifest_.files[files[i]];
      const std::string path = dir_ + "/" + rec.name;
      StatusOr<uint32_t> crc = FileCrc32c(path);
      if (!crc.ok()) {
        results[i] = crc.status();
      } else if (*crc != rec.crc32c) {
        results[i] = DataLoss(path + ": crc32c " + Crc32cHex(*crc) + " != manifest " + Crc32cHex(rec.crc32c) +
                              " (corrupt)");
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min<size_t>(4, files.size()); ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) HT_RETURN_IF_ERROR(s);
  if (bytes != nullptr) *bytes = total;
  return Status::Ok();
}

Status CheckpointReader::ReadTensor(const std::string& name, int state, float* dst) const {
  for (const UnitEntry& u : manifest_.layout.units) {
    for (const TensorEntry& t : u.tensors) {
      if (t.name == name) return ReadOld(u.index, {t.offset, t.offset + t.numel}, state, dst);
    }
  }
  return NotFound("checkpoint has no tensor " + name);
}

}  // namespace hypertrain::ckpt
