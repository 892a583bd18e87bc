#include "runtime/data/shard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"

namespace hypertrain::data {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Maps a whole file read-only.
struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
};

StatusOr<Mapping> MapFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(fmt::format("{}: no such file", path));
    return IoError(fmt::format("{}: open failed: {}", path, std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return IoError(fmt::format("{}: stat failed: {}", path, std::strerror(e)));
  }
  Mapping m;
  m.bytes = static_cast<size_t>(st.st_size);
  if (m.bytes > 0) {
    m.addr = ::mmap(nullptr, m.bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (m.addr == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return IoError(fmt::format("{}: mmap failed: {}", path, std::strerror(e)));
    }
  }
  ::close(fd);
  return m;
}

void Unmap(Mapping& m) {
  if (m.addr != nullptr && m.bytes > 0) ::munmap(m.addr, m.bytes);
  m = {};
}

}  // namespace

TokenFile::~TokenFile() {
  if (map_ != nullptr && map_bytes_ > 0) ::munmap(map_, map_bytes_);
}

StatusOr<std::unique_ptr<TokenFile>> TokenFile::OpenShard(const std::string& path) {
  HT_ASSIGN_OR_RETURN(Mapping m, MapFile(path));
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->path_ = path;
  f->map_ = m.addr;
  f->map_bytes_ = m.bytes;
  const auto* p = static_cast<const uint8_t*>(m.addr);
  if (m.bytes < static_cast<size_t>(kShardHeaderBytes)) {
    return DataLoss(fmt::format("{}: {} bytes is shorter than the {}-byte shard header", path,
                                m.bytes, kShardHeaderBytes));
  }
  if (std::memcmp(p, kShardMagic, 8) != 0) {
    return DataLoss(fmt::format("{}: bad magic (not a hypertrain token shard; expected 'HTTOKENS')",
                                path));
  }
  const uint32_t version = Load<uint32_t>(p + 8);
  if (version != kShardVersion) {
    return DataLoss(fmt::format("{}: unsupported shard version {} (this build reads {})", path,
                                version, kShardVersion));
  }
  const uint32_t bpt = Load<uint32_t>(p + 12);
  if (bpt != 2 && bpt != 4) {
    return DataLoss(fmt::format("{}: bytes per token {} is not 2 (uint16) or 4 (uint32)", path, bpt));
  }
  const uint64_t n = Load<uint64_t>(p + 16);
  const uint64_t want = static_cast<uint64_t>(kShardHeaderBytes) + n * bpt;
  if (n > (uint64_t{1} << 48) || want != m.bytes) {
    return DataLoss(fmt::format("{}: header says {} tokens x {} bytes = {} bytes, file has {} "
                                "(truncated or corrupt)",
                                path, n, bpt, want, m.bytes));
  }
  f->bytes_per_token_ = static_cast<int>(bpt);
  f->num_tokens_ = static_cast<int64_t>(n);
  f->vocab_size_ = Load<uint32_t>(p + 24);
  f->tokens_ = p + kShardHeaderBytes;
  return f;
}

StatusOr<std::unique_ptr<TokenFile>> TokenFile::OpenMegatron(const std::string& prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  HT_ASSIGN_OR_RETURN(Mapping idx, MapFile(idx_path));
  const auto* p = static_cast<const uint8_t*>(idx.addr);
  auto fail = [&](const std::string& why) {
    Unmap(idx);
    return DataLoss(fmt::format("{}: {}", idx_path, why));
  };
  static constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  if (idx.bytes < 34 || std::memcmp(p, kMagic, 9) != 0) {
    return fail("bad magic (not a Megatron MMIDIDX index)");
  }
  if (Load<uint64_t>(p + 9) != 1) return fail("unsupported index version (expected 1)");
  const uint8_t code = p[17];
  int bpt = 0;
  if (code == 8) bpt = 2;       // uint16
  else if (code == 4) bpt = 4;  // int32
  else return fail(fmt::format("unsupported dtype code {} (supported: 8 = uint16, 4 = int32)", code));
  const uint64_t nseq = Load<uint64_t>(p + 18);
  const uint64_t ndoc = Load<uint64_t>(p + 26);
  const uint64_t need = 34 + nseq * 4 + nseq * 8 + ndoc * 8;
  if (nseq > (uint64_t{1} << 40) || ndoc > (uint64_t{1} << 40) || need != idx.bytes) {
    return fail(fmt::format("{} sequences / {} documents need {} bytes, index has {}", nseq, ndoc,
                            need, idx.bytes));
  }
  const uint8_t* sizes = p + 34;
  const uint8_t* ptrs = sizes + nseq * 4;
  uint64_t expect = 0;
  for (uint64_t i = 0; i < nseq; ++i) {
    if (Load<int64_t>(ptrs + i * 8) != static_cast<int64_t>(expect)) {
      return fail(fmt::format("sequence {} is not contiguous in {} (unsupported)", i, bin_path));
    }
    expect += static_cast<uint64_t>(Load<int32_t>(sizes + i * 4)) * bpt;
  }
  Unmap(idx);
  HT_ASSIGN_OR_RETURN(Mapping bin, MapFile(bin_path));
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->path_ = bin_path;
  f->map_ = bin.addr;
  f->map_bytes_ = bin.bytes;
  if (bin.bytes != expect) {
    return DataLoss(fmt::format("{}: index describes {} bytes of tokens, file has {}", bin_path,
                                expect, bin.bytes));
  }
  f->bytes_per_token_ = bpt;
  f->num_tokens_ = static_cast<int64_t>(expect / bpt);
  f->tokens_ = static_cast<const uint8_t*>(bin.addr);
  return f;
}

void TokenFile::Read(int64_t begin, int64_t n, int32_t* out) const {
  if (!segments_.empty()) {
    ReadSegments(begin, n, out);
    return;
  }
  if (bytes_per_token_ == 2) {
    for (int64_t i = 0; i < n; ++i) out[i] = Load<uint16_t>(tokens_ + (begin + i) * 2);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(Load<uint32_t>(tokens_ + (begin + i) * 4));
  }
}

Status WriteShard(const std::string& path, const std::vector<uint32_t>& tokens, int bpt,
                  uint32_t vocab_size) {
  if (bpt != 2 && bpt != 4) return InvalidArgument(fmt::format("bytes per token {} is not 2 or 4", bpt));
  std::string buf(kShardHeaderBytes, '\0');
  std::memcpy(buf.data(), kShardMagic, 8);
  const uint32_t version = kShardVersion, b = static_cast<uint32_t>(bpt);
  const uint64_t n = tokens.size();
  std::memcpy(buf.data() + 8, &version, 4);
  std::memcpy(buf.data() + 12, &b, 4);
  std::memcpy(buf.data() + 16, &n, 8);
  std::memcpy(buf.data() + 24, &vocab_size, 4);
  buf.resize(kShardHeaderBytes + n * bpt);
  for (uint64_t i = 0; i < n; ++i) {
    if (bpt == 2) {
      if (tokens[i] > 0xFFFF) {
        return InvalidArgument(fmt::format("token {} does not fit a uint16 shard", tokens[i]));
      }
      const uint16_t t = static_cast<uint16_t>(tokens[i]);
      std::memcpy(buf.data() + kShardHeaderBytes + i * 2, &t, 2);
    } else {
      std::memcpy(buf.data() + kShardHeaderBytes + i * 4, &tokens[i], 4);
    }
  }
  // Atomic: temporary file, fsync, rename, fsync of the directory.
  return WriteFileAtomically(path, buf);
}

std::vector<uint32_t> ByteTokenize(const std::string& text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (unsigned char c : text) out.push_back(c);
  return out;
}

StatusOr<int64_t> PrepareByteShards(const std::vector<std::string>& inputs,
                                    const std::string& out_dir, int64_t tokens_per_shard) {
  if (inputs.empty()) return InvalidArgument("prepare: no input files given");
  if (tokens_per_shard < 2) {
    return InvalidArgument(fmt::format("prepare: tokens per shard {} must be >= 2", tokens_per_shard));
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return IoError(fmt::format("prepare: cannot create {}: {}", out_dir, ec.message()));
  std::vector<uint32_t> pending;
  int shard = 0;
  int64_t total = 0;
  auto flush = [&](bool all) -> Status {
    while (static_cast<int64_t>(pending.size()) >= tokens_per_shard ||
           (all && !pending.empty())) {
      const size_t n = std::min<size_t>(pending.size(), tokens_per_shard);
      std::vector<uint32_t> chunk(pending.begin(), pending.begin() + n);
      pending.erase(pending.begin(), pending.begin() + n);
      HT_RETURN_IF_ERROR(WriteShard(fmt::format("{}/shard_{:05d}.bin", out_dir, shard++), chunk, 2, 256));
      total += static_cast<int64_t>(n);
    }
    return Status::Ok();
  };
  for (const std::string& in : inputs) {
    std::ifstream f(in, std::ios::binary);
    if (!f) return NotFound(fmt::format("prepare: cannot read input file {}", in));
    std::stringstream ss;
    ss << f.rdbuf();
    const std::vector<uint32_t> t = ByteTokenize(ss.str());
    pending.insert(pending.end(), t.begin(), t.end());
    pending.push_back(0);  // document separator
    HT_RETURN_IF_ERROR(flush(false));
  }
  HT_RETURN_IF_ERROR(flush(true));
  return total;
}

}  // namespace hypertrain::data
