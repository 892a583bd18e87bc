#include "runtime/ckpt/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit

}  // namespace

const char* StDTypeName(StDType d) {
  switch (d) {
    case StDType::kF32: return "F32";
    case StDType::kBF16: return "BF16";
    case StDType::kF16: return "F16";
  }
  return "?";
}

int StDTypeSize(StDType d) { return d == StDType::kF32 ? 4 : 2; }

StatusOr<StDType> ParseStDType(const std::string& s) {
  if (s == "F32") return StDType::kF32;
  if (s == "BF16") return StDType::kBF16;
  if (s == "F16") return StDType::kF16;
  return InvalidArgument("safetensors dtype " + s + " is not supported (F32, BF16, F16)");
}

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<SafetensorsReader> SafetensorsReader::Open(const std::string& path) {
  SafetensorsReader r;
  r.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no file " + path);
    return ErrnoStatus("open", path, errno);
  }
  r.fd_ = Fd(fd);
  HT_ASSIGN_OR_RETURN(int64_t file_size, FileSize(path));
  auto bad = [&](const std::string& why) { return DataLoss(path + ": invalid safetensors file: " + why); };
  if (file_size < 8) return bad("shorter than the 8-byte header length");
  unsigned char lenb[8];
  HT_RETURN_IF_ERROR(PreadExact(fd, lenb, 8, 0, path));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(lenb[i]) << (8 * i);
  if (n > kMaxHeader) return bad("header length " + std::to_string(n) + " exceeds 100 MiB");
  if (static_cast<int64_t>(8 + n) > file_size) return bad("header length " + std::to_string(n) + " runs past the end of the file");
  std::string text(n, '\0');
  HT_RETURN_IF_ERROR(PreadExact(fd, text.data(), n, 8, path));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("header is not a JSON object");
  r.buffer_start_ = 8 + static_cast<int64_t>(n);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return bad("__metadata__ value of " + m.key() + " is not a string");
        r.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const json& t = *it;
    const std::string where = "tensor " + it.key();
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets")) {
      return bad(where + " lacks dtype, shape or data_offsets");
    }
    StTensorInfo info;
    info.name = it.key();
    if (!t["dtype"].is_string()) return bad(where + ": dtype is not a string");
    StatusOr<StDType> dt = ParseStDType(t["dtype"].get<std::string>());
    if (!dt.ok()) return bad(where + ": " + dt.status().message());
    info.dtype = *dt;
    if (!t["shape"].is_array()) return bad(where + ": shape is not an array");
    for (const json& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return bad(where + ": shape has a non-integer or negative");
      info.shape.push_back(d.get<int64_t>());
    }
    const json& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_integer() || !off[1].is_number_integer()) {
      return bad(where + ": data_offsets must be [begin, end]");
    }
    info.begin = off[0].get<int64_t>();
    info.end = off[1].get<int64_t>();
    if (info.begin < 0 || info.end < info.begin) return bad(where + ": data_offsets out of order");
    if (info.end - info.begin != info.numel() * StDTypeSize(info.dtype)) {
      return bad(where + ": data_offsets span " + std::to_string(info.end - info.begin) + " bytes, shape and dtype need " +
                 std::to_string(info.numel() * StDTypeSize(info.dtype)));
    }
    r.tensors_.push_back(std::move(info));
  }
  std::vector<const StTensorInfo*> order;
  for (const auto& t : r.tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin || (a->begin == b->begin && a->end < b->end); });
  int64_t at = 0;
  for (const StTensorInfo* t : order) {
    if (t->begin != at) {
      return bad("tensor " + t->name + " starts at " + std::to_string(t->begin) + ", expected " + std::to_string(at) +
                 (t->begin < at ? " (overlap)" : " (gap)"));
    }
    at = t->end;
  }
  if (r.buffer_start_ + at != file_size) {
    return bad("tensors end at byte " + std::to_string(r.buffer_start_ + at) + " but the file has " +
               std::to_string(file_size) + (r.buffer_start_ + at > file_size ? " (truncated)" : " (trailing bytes)"));
  }
  return r;
}

const StTensorInfo* SafetensorsReader::Find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status SafetensorsReader::ReadF32(const StTensorInfo& t, int64_t elem_begin, int64_t count, float* dst) const {
  if (elem_begin < 0 || count < 0 || elem_begin + count > t.numel()) {
    return InvalidArgument("read outside tensor " + t.name + " of " + path_);
  }
  const int es = StDTypeSize(t.dtype);
  const int64_t off = buffer_start_ + t.begin + elem_begin * es;
  if (t.dtype == StDType::kF32) return PreadExact(fd_.get(), dst, count * 4, off, path_);
  constexpr int64_t kChunk = 1 << 20;
  std::vector<uint16_t> tmp(std::min(count, kChunk));
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(count - done, kChunk);
    HT_RETURN_IF_ERROR(PreadExact(fd_.get(), tmp.data(), n * 2, off + done * 2, path_));
    for (int64_t i = 0; i < n; ++i) {
      dst[done + i] = t.dtype == StDType::kBF16 ? Bf16ToFloat(tmp[i]) : F16ToFloat(tmp[i]);
    }
    done += n;
  }
  return Status::Ok();
}

Status WriteSafetensors(const std::string& path, StDType dtype, const std::vector<StTensorOut>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  if (dtype == StDType::kF16) return InvalidArgument("export as F16 is not supported (use BF16 or F32)");
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t at = 0;
  const int es = StDTypeSize(dtype);
  for (const StTensorOut& t : tensors) {
    if (header.contains(t.name)) return InvalidArgument("duplicate tensor name " + t.name);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    header[t.name] = {{"dtype", StDTypeName(dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + n * es}}};
    at += n * es;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  HT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open(path));
  unsigned char lenb[8];
  for (int i = 0; i < 8; ++i) lenb[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xFF);
  HT_RETURN_IF_ERROR(w.Append(lenb, 8));
  HT_RETURN_IF_ERROR(w.Append(text));
  std::vector<float> buf;
  std::vector<uint16_t> half;
  for (const StTensorOut& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    buf.assign(n, 0.0f);
    HT_RETURN_IF_ERROR(t.fill(buf.data()));
    if (dtype == StDType::kF32) {
      HT_RETURN_IF_ERROR(w.Append(buf.data(), n * 4));
    } else {
      half.resize(n);
      for (int64_t i = 0; i < n; ++i) half[i] = FloatToBf16(buf[i]);
      HT_RETURN_IF_ERROR(w.Append(half.data(), n * 2));
    }
  }
  return w.Commit();
}

}  // namespace hypertrain::ckpt
