#include "runtime/ckpt/peft_hooks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/layout_desc.h"
#include "runtime/ckpt/peft_export.h"

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;

// CRC-32C of up to `n` bytes at `offset` of an open file.
StatusOr<uint32_t> CrcAt(const Fd& fd, const std::string& path, int64_t offset, int64_t n) {
  std::vector<char> buf(static_cast<size_t>(n));
  int64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd.get(), buf.data() + got, n - got, offset + got);
    if (r < 0) return ErrnoStatus("read", path, errno);
    if (r == 0) break;
    got += r;
  }
  return Crc32c(buf.data(), static_cast<size_t>(got));
}

StatusOr<std::string> Fingerprint(const std::string& dir) {
  namespace fs = std::filesystem;
  HT_ASSIGN_OR_RETURN(std::string cfg, ReadFileToString(dir + "/config.json"));
  uint32_t crc = Crc32c(cfg.data(), cfg.size());
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path().filename().string());
  }
  if (ec) return NotFound(dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    const std::string path = dir + "/" + f;
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus("open", path, errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", path, errno);
    const int64_t size = st.st_size, mib = int64_t{1} << 20;
    HT_ASSIGN_OR_RETURN(uint32_t head, CrcAt(fd, path, 0, std::min(size, mib)));
    HT_ASSIGN_OR_RETURN(uint32_t tail, CrcAt(fd, path, std::max<int64_t>(0, size - mib), std::min(size, mib)));
    const std::string rec = fmt::format("{}:{}:{:08x}:{:08x};", f, size, head, tail);
    crc = Crc32cExtend(crc, rec.data(), rec.size());
  }
  return fmt::format("crc32c:{:08x}:{}files", crc, files.size());
}

}  // namespace

Status LoadFrozenBase(const config::TrainConfig& c, model::Backend& backend) {
  const model::ParamLayout* base = backend.BaseLayout();
  if (base == nullptr) return FailedPrecondition("LoadFrozenBase: the backend has no frozen base");
  const std::string& dir = c.finetune.hf_model_name_or_path;
  if (dir.empty()) return Status::Ok();
  HT_ASSIGN_OR_RETURN(HfWeights w, HfWeights::Open(dir, c.model));
  const ModelLayoutDesc d = DescribeLayout(*base);
  HT_RETURN_IF_ERROR(w.CheckCovers(d));
  std::vector<float> buf;
  for (const UnitEntry& u : d.units) {
    // A sharded base: only what this rank keeps (a QLoRA block whole).
    const model::Range r = backend.BaseNeeded(u.index);
    if (r.empty()) continue;
    buf.assign(r.size(), 0.0f);
    HT_RETURN_IF_ERROR(w.ReadRange(u, {r.begin, r.end}, buf.data()));
    HT_RETURN_IF_ERROR(backend.WriteBase(u.index, r, buf.data()));
  }
  return Status::Ok();
}

StatusOr<json> BaseReference(const config::TrainConfig& c) {
  const model::PeftOptions& p = c.finetune.peft;
  json targets = json::array();
  for (int t : p.targets) targets.push_back(model::TargetModuleName(t));
  json j = {{"peft_type", model::PeftTypeName(p.type)},
            {"rank", p.rank},
            {"alpha", p.alpha},
            {"dropout", p.dropout},
            {"targets", targets},
            {"base", c.finetune.hf_model_name_or_path}};
  if (c.finetune.hf_model_name_or_path.empty()) {
    j["base_fingerprint"] = fmt::format("random:seed={}", c.seed);
  } else {
    HT_ASSIGN_OR_RETURN(std::string fp, Fingerprint(c.finetune.hf_model_name_or_path));
    j["base_fingerprint"] = fp;
  }
  return j;
}

Status CheckBaseReference(const json& saved, const json& now, const std::string& where) {
  for (const char* k : {"peft_type", "rank", "targets", "base_fingerprint"}) {
    if (!saved.contains(k) || saved[k] != now[k]) {
      return FailedPrecondition(fmt::format(
          "{} was trained with PEFT {} on base '{}' ({}); this run has {} on base '{}' ({}): "
          "{} differs. Resume with the same base and model.peft, or start fresh "
          "(exp_manager.start_fresh: true or another exp_dir)",
          where, saved.value("peft_type", std::string("?")), saved.value("base", std::string()),
          saved.value("base_fingerprint", std::string("?")), now.value("peft_type", std::string()),
          now.value("base", std::string()), now.value("base_fingerprint", std::string()), k));
    }
  }
  return Status::Ok();
}

Status ExportAdapterFromBackend(const config::TrainConfig& c, model::Backend& backend,
                                const std::string& dir) {
  const model::ParamLayout& l = backend.layout();
  return ExportAdapter(l, c.finetune.peft, c.finetune.hf_model_name_or_path, dir,
                       [&](int u, float* dst) -> Status {
                         const model::Range own = backend.Owned(u);
                         if (own.begin != 0 || own.end != l.unit(u).padded_numel) {
                           return FailedPrecondition("adapter export needs whole adapter units");
                         }
                         return backend.ReadState(u, model::StateKind::kMasterParams, dst);
                       });
}

Status ExportMergedFromBackend(const config::TrainConfig& c, model::Backend& backend,
                               const std::string& dir, StDType dtype, bool write) {
  const model::ParamLayout* base = backend.BaseLayout();
  if (base == nullptr) return FailedPrecondition("merged export needs a PEFT backend");
  const ModelLayoutDesc d = DescribeLayout(*base);
  // A sharded base: every rank of the shard group gathers each unit in turn
  // (a collective), the writer keeps it whole in host memory (fp32, the base
  // as the forward sees it) and merges from that copy.
  std::vector<std::vector<float>> gathered;
  if (backend.ShardsBase()) {
    if (write) gathered.resize(d.units.size());
    for (const UnitEntry& u : d.units) {
      HT_RETURN_IF_ERROR(backend.GatherBase(u.index));
      Status s;
      if (s.ok() && write) {
        gathered[u.index].assign(u.padded_numel, 0.0f);
        s = backend.ReadBase(u.index, {0, u.padded_numel}, gathered[u.index].data());
      }
      HT_RETURN_IF_ERROR(backend.ReleaseBase(u.index));
      HT_RETURN_IF_ERROR(s);
    }
  }
  if (!write) return Status::Ok();
  HT_ASSIGN_OR_RETURN(HfBase hf_base, ReadHfBase(c.finetune.hf_model_name_or_path));
  // The adapter as PEFT would load it, straight from the master weights.
  LoadedAdapter a;
  a.options = c.finetune.peft;
  const model::ParamLayout& l = backend.layout();
  std::vector<float> unit;
  for (const model::UnitLayout& u : l.units()) {
    unit.assign(u.padded_numel, 0.0f);
    HT_RETURN_IF_ERROR(backend.ReadState(u.index, model::StateKind::kMasterParams, unit.data()));
    for (const model::TensorSlot& t : u.tensors) {
      a.tensors[t.name] = {t.shape, std::vector<float>(unit.begin() + t.offset,
                                                       unit.begin() + t.offset + t.numel)};
    }
  }
  return ExportMerged(d, c.model, a, dir, dtype, [&](const TensorEntry& t, float* dst) -> Status {
    for (const UnitEntry& u : d.units) {
      for (const TensorEntry& x : u.tensors) {
        if (x.name != t.name) continue;
        if (gathered.empty()) return backend.ReadBase(u.index, {x.offset, x.offset + x.numel}, dst);
        const float* src = gathered[u.index].data() + x.offset;
        std::copy(src, src + x.numel, dst);
        return Status::Ok();
      }
    }
    return NotFound("base tensor " + t.name);
  }, hf_base);
}

}  // namespace hypertrain::ckpt
