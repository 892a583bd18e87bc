#include "runtime/train/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/crc32c.h"

namespace hypertrain::train {
namespace {

// --- protobuf wire format ---------------------------------------------------
void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutTag(std::string& out, int field, int wire) { PutVarint(out, (uint64_t(field) << 3) | wire); }
void PutBytes(std::string& out, int field, const std::string& b) {
  PutTag(out, field, 2);
  PutVarint(out, b.size());
  out += b;
}
template <typename T>
void PutFixed(std::string& out, int field, T v) {
  PutTag(out, field, sizeof(T) == 8 ? 1 : 5);
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

class ProtoReader {
 public:
  ProtoReader(const char* p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ >= end_; }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      *v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool Bytes(std::string* out) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    out->assign(p_, n);
    p_ += n;
    return true;
  }
  bool Fixed(void* out, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    std::memcpy(out, p_, n);
    p_ += n;
    return true;
  }
  bool Skip(int wire) {
    uint64_t v;
    std::string s;
    char buf[8];
    switch (wire) {
      case 0: return Varint(&v);
      case 1: return Fixed(buf, 8);
      case 2: return Bytes(&s);
      case 5: return Fixed(buf, 4);
      default: return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t n) {
  const uint32_t c = hypertrain::Crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

StatusOr<std::unique_ptr<TfEventsWriter>> TfEventsWriter::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("tensorboard: cannot create {}: {}", dir, ec.message()));
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  const auto now = std::chrono::system_clock::now();
  const double wall = std::chrono::duration<double>(now.time_since_epoch()).count();
  std::unique_ptr<TfEventsWriter> w(new TfEventsWriter());
  w->path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", dir, static_cast<int64_t>(wall), host,
                         ::getpid());
  w->f_ = std::fopen(w->path_.c_str(), "wb");
  if (w->f_ == nullptr) {
    return IoError(fmt::format("tensorboard: cannot create {}: {}", w->path_, std::strerror(errno)));
  }
  std::string ev;
  PutFixed<double>(ev, 1, wall);
  PutBytes(ev, 3, "brain.Event:2");
  HT_RETURN_IF_ERROR(w->WriteRecord(ev));
  HT_RETURN_IF_ERROR(w->Flush());
  return w;
}

TfEventsWriter::~TfEventsWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

Status TfEventsWriter::WriteRecord(const std::string& data) {
  char header[12];
  const uint64_t len = data.size();
  std::memcpy(header, &len, 8);
  const uint32_t len_crc = MaskedCrc32c(header, 8);
  std::memcpy(header + 8, &len_crc, 4);
  const uint32_t data_crc = MaskedCrc32c(data.data(), data.size());
  if (std::fwrite(header, 1, 12, f_) != 12 || std::fwrite(data.data(), 1, data.size(), f_) != data.size() ||
      std::fwrite(&data_crc, 1, 4, f_) != 4) {
    return IoError(fmt::format("tensorboard: write to {} failed", path_));
  }
  return Status::Ok();
}

Status TfEventsWriter::AddScalars(int64_t step, double wall_time,
                                  const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    PutBytes(v, 1, tag);
    PutFixed<float>(v, 2, static_cast<float>(value));
    PutBytes(summary, 1, v);
  }
  std::string ev;
  PutFixed<double>(ev, 1, wall_time);
  PutTag(ev, 2, 0);
  PutVarint(ev, static_cast<uint64_t>(step));
  PutBytes(ev, 5, summary);
  return WriteRecord(ev);
}

Status TfEventsWriter::Flush() {
  if (std::fflush(f_) != 0) return IoError(fmt::format("tensorboard: flush of {} failed", path_));
  return Status::Ok();
}

StatusOr<TfEventsFile> ReadTfEvents(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(fmt::format("{}: cannot open", path));
  const std::string all((std::istreambuf_iterator<char>(f)), {});
  TfEventsFile out;
  size_t off = 0;
  int record = 0;
  while (off < all.size()) {
    auto bad = [&](const char* why) {
      return DataLoss(fmt::format("{}: record {} at byte {}: {}", path, record, off, why));
    };
    if (all.size() - off < 12) return bad("truncated header");
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, all.data() + off, 8);
    std::memcpy(&len_crc, all.data() + off + 8, 4);
    if (MaskedCrc32c(all.data() + off, 8) != len_crc) return bad("length crc mismatch");
    if (all.size() - off - 12 < len + 4) return bad("truncated data");
    const char* data = all.data() + off + 12;
    std::memcpy(&data_crc, data + len, 4);
    if (MaskedCrc32c(data, len) != data_crc) return bad("data crc mismatch");
    ProtoReader ev(data, len);
    double wall = 0;
    int64_t step = 0;
    std::vector<std::pair<std::string, float>> values;
    while (!ev.done()) {
      uint64_t key;
      if (!ev.Varint(&key)) return bad("bad event field");
      const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      bool ok = true;
      if (field == 1 && wire == 1) {
        ok = ev.Fixed(&wall, 8);
      } else if (field == 2 && wire == 0) {
        uint64_t s;
        ok = ev.Varint(&s);
        step = static_cast<int64_t>(s);
      } else if (field == 3 && wire == 2) {
        ok = ev.Bytes(&out.file_version);
      } else if (field == 5 && wire == 2) {
        std::string summary;
        ok = ev.Bytes(&summary);
        ProtoReader sr(summary.data(), summary.size());
        while (ok && !sr.done()) {
          uint64_t sk;
          std::string value;
          ok = sr.Varint(&sk) && (sk >> 3) == 1 && (sk & 7) == 2 && sr.Bytes(&value);
          ProtoReader vr(value.data(), value.size());
          std::string tag;
          float x = 0;
          while (ok && !vr.done()) {
            uint64_t vk;
            ok = vr.Varint(&vk);
            if (!ok) break;
            if ((vk >> 3) == 1 && (vk & 7) == 2) ok = vr.Bytes(&tag);
            else if ((vk >> 3) == 2 && (vk & 7) == 5) ok = vr.Fixed(&x, 4);
            else ok = vr.Skip(static_cast<int>(vk & 7));
          }
          values.emplace_back(tag, x);
        }
      } else {
        ok = ev.Skip(wire);
      }
      if (!ok) return bad("malformed Event proto");
    }
    for (auto& [tag, x] : values) out.scalars.push_back({step, wall, tag, x});
    off += 12 + len + 4;
    ++record;
  }
  return out;
}

}  // namespace hypertrain::train
